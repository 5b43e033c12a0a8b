"""Two API servers in one process, each on its own store.

The routes of the kinds are built once per process and shared by every app in
it (``shoal.api.routes.build_router``): each endpoint must find its own app's
store through the request. Every verb FastAPI routes (the hot writes are
answered before the router) is tried on both servers.
"""

from __future__ import annotations

import httpx
import pytest

from shoal.api.server import start_api
from shoal.store.sqlite import SqliteStore
from shoal.testing import shipped
from tests.api.samples import SAMPLES, Sample
from tests.util import made_by_tests


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.plural)
async def test_each_app_reaches_its_own_store(sample: Sample) -> None:
    first = await start_api(SqliteStore(":memory:"), security=shipped.security())
    second = await start_api(SqliteStore(":memory:"), security=shipped.security())
    admin = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
    try:
        async with (
            httpx.AsyncClient(base_url=first.url, headers=admin) as a,
            httpx.AsyncClient(base_url=second.url, headers=admin) as b,
        ):
            namespace = "default" if sample.namespaced else None
            body = sample.body("x", namespace)
            created = await a.post(sample.collection(), json=body)
            assert created.status_code in (200, 201), created.text
            assert (await a.get(sample.item("x"))).status_code == 200
            assert (await b.get(sample.item("x"))).status_code == 404
            listed = (await b.get(sample.collection())).json()
            assert made_by_tests(listed["items"]) == []
            ours = made_by_tests((await a.get(sample.collection())).json()["items"])
            assert [i["metadata"]["name"] for i in ours] == ["x"]
            changed = created.json()
            changed["metadata"]["labels"] = {"changed": "yes"}
            assert (await b.put(sample.item("x"), json=changed)).status_code == 404
            updated = await a.put(sample.item("x"), json=changed)
            assert updated.status_code == 200, updated.text
            assert updated.json()["metadata"]["labels"] == {"changed": "yes"}
            assert (await b.delete(sample.item("x"))).status_code == 404
            assert (await a.delete(sample.item("x"))).status_code == 200
    finally:
        for server in (first, second):
            server.own_store = True
            await server.stop()
