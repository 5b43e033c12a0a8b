"""Fixtures shared by the whole suite: an API server on a fresh store and a client; the API
as a process of its own on a SQLite file, for the tests that kill processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.machinery import outbound
from shoal.testing.launch import ApiProcess
from tests.util import api_server


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    """The API on an in-memory SQLite store, on a free loopback port."""
    async with api_server() as server:
        yield server


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


@pytest.fixture
def tenants_may_reach_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outbound policy that lists loopback, where these tests' providers listen: a
    namespaced provider's URL is a tenant's, refused there by default."""
    path = tmp_path / "outbound.yaml"
    path.write_text("networks: [127.0.0.0/8]\n")
    monkeypatch.setenv(outbound.SETTING, str(path))
