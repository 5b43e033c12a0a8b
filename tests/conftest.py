"""Fixtures shared by the whole suite: an API server on a fresh store with the security
``shoal up`` ships, a client of its administrator and clients of its components; the API
as a process of its own on a SQLite file, for the tests that kill processes.

The tests that need an API without security take ``open_api`` (or call
``api_server(security=None)``) and say why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.machinery import outbound
from shoal.testing import shipped
from shoal.testing.launch import ApiProcess
from tests.util import api_server


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    """The API on an in-memory SQLite store, on a free loopback port, secured as under
    ``shoal up``: tokens, RBAC with its default roles, sealed secrets, anonymous refused."""
    async with api_server() as server:
        yield server


@pytest.fixture
async def open_api() -> AsyncIterator[ApiServer]:
    """The API without security (anonymous, always-allow): only for what must talk to an
    open API, such as Krake's controllers, which send no token."""
    async with api_server(security=None) as server:
        yield server


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[ShoalClient]:
    """The administrator's client (the token ``shoal up`` writes into its CLI config)."""
    async with shipped.client(api.url) as c:
        yield c


@pytest.fixture
async def client_of(api: ApiServer) -> AsyncIterator[shipped.Callers]:
    """``client_of("kube-controller")``: a client with the identity ``shoal up`` gives that
    component (``system:kube-controller`` and its role), for the components a test starts."""
    callers = shipped.Callers(api.url)
    try:
        yield callers
    finally:
        await callers.close()


Tenant = Callable[[str, str], Awaitable[ShoalClient]]


@pytest.fixture
async def tenant(client: ShoalClient) -> AsyncIterator[Tenant]:
    """``await tenant("alice", "a")``: a client of ``alice`` (a tenant, ``shipped.TENANTS``)
    once the administrator gave her every verb on namespace ``a`` but reading secrets."""
    made: list[ShoalClient] = []

    async def grant(user: str, namespace: str) -> ShoalClient:
        made.append(await shipped.grant_namespace(client, user, namespace))
        return made[-1]

    try:
        yield grant
    finally:
        for each in made:
            await each.close()


@pytest.fixture
def api_process(tmp_path: Path) -> Iterator[ApiProcess]:
    """``shoal api`` on ``tmp_path/shoal.db`` secured as under ``shoal up``, its log in
    ``tmp_path/api.log``; stopped after. ``api_process.client()`` is its administrator."""
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
