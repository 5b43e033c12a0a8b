"""Any JSON value at any place of any kind's body is answered 2xx or 4xx, never 5xx.

Each example takes a kind's sample, replaces one node of it (found by walking the
sample: every object member and list item, the manifest's included) or the whole body
with an arbitrary JSON value, and sends it as a create and as an update.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.api.app import create_app
from shoal.store.sqlite import SqliteStore
from tests.api.samples import SAMPLES, Sample

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                  max_size=3),
    max_leaves=8,
)  # fmt: skip

Path = tuple[Any, ...]


def _paths(node: Any, at: Path = ()) -> Iterator[Path]:
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*at, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*at, index))


def _replaced(body: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    body = copy.deepcopy(body)
    node = body
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return body


CASES = [
    (sample, path)
    for sample in SAMPLES
    for path in _paths(sample.body("x", "default" if sample.namespaced else None))
    if path[:1] != ("metadata",) or path[1:2] not in (("name",), ("namespace",))
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def in_process() -> AsyncIterator[httpx.AsyncClient]:
    store = SqliteStore(":memory:")
    transport = httpx.ASGITransport(app=create_app(store), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://shoal") as client:
        yield client
    await store.close()


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("sample", "path"), CASES, ids=lambda v: str(v))
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=JSON)
async def test_any_value_anywhere_is_never_a_server_error(
    in_process: httpx.AsyncClient, sample: Sample, path: Path, value: Any
) -> None:
    namespace = "default" if sample.namespaced else None
    body = _replaced(sample.body("x", namespace), path, value)
    created = await in_process.post(sample.collection(), json=body)
    assert created.status_code < 500, (path, value, created.text)
    updated = await in_process.put(sample.item("x"), json=body)
    assert updated.status_code < 500, (path, value, updated.text)
