"""Generated requests over every operation of ``/openapi.json``: no answer is a 5xx.

The app runs in-process (ASGI) on a store with one object of each kind, so that
generated reads, updates and subresource calls also reach existing objects.
Watches are turned into lists: a stream would never end.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from shoal.api.app import create_app
from shoal.api.codec import encode
from shoal.model.registry import KINDS
from shoal.store.sqlite import SqliteStore
from tests.api.samples import SAMPLES

_store = SqliteStore(":memory:")


def _seed() -> None:
    """One object named "a" in namespace "a" (and global) per kind."""

    async def run() -> None:
        for sample in SAMPLES:
            kind = next(k for k in KINDS if k.plural == sample.plural)
            obj: Any = kind.model_validate(sample.body("a", "a" if sample.namespaced else None))
            await _store.create(obj.store_key(), encode(obj))

    asyncio.run(run())


_seed()
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(_store))


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_errors(case: schemathesis.Case) -> None:
    if case.query:
        case.query.pop("watch", None)
    case.call_and_validate(checks=[not_a_server_error])
