"""Fixtures shared by the whole suite: an API server on a fresh store and a client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from shoal.api.server import ApiServer, start_api
from shoal.client.rest import ShoalClient
from shoal.store.sqlite import SqliteStore


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    """The API on an in-memory SQLite store, on a free loopback port."""
    server = await start_api(SqliteStore(":memory:"))
    server.own_store = True
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[ShoalClient]:
    async with ShoalClient(api.url) as c:
        yield c
