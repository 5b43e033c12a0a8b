"""Fixtures shared by the whole suite: an API server on a fresh store and a client; the API
as a process of its own on a SQLite file, for the tests that kill processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from shoal.api.server import ApiServer, start_api
from shoal.client.rest import ShoalClient
from shoal.store.sqlite import SqliteStore
from shoal.testing.launch import ApiProcess


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


@pytest.fixture
def api_process(tmp_path: Path) -> Iterator[ApiProcess]:
    """``shoal api`` on ``tmp_path/shoal.db``, its log in ``tmp_path/api.log``; stopped after."""
    server = ApiProcess(f"sqlite://{tmp_path / 'shoal.db'}", log=tmp_path / "api.log")
    try:
        yield server
    finally:
        server.stop()
