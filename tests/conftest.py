"""Fixtures shared by the whole suite: an API server on a fresh store with the security
``shoal up`` ships, a client of its administrator and clients of its components; the API
as a process of its own on a SQLite file, for the tests that kill processes; simulated
clusters (``sim``) and the control plane on them (``control_plane``), shaped per folder or
module by overriding ``sim_options``, ``api_options`` and ``control_plane_options``.

The tests that need an API without security take ``open_api`` (or call
``api_server(security=None)``) and say why.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.machinery import outbound
from shoal.model.scheduler_config import SchedulerConfig
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.sim.server import SimServer
from shoal.testing import shipped
from shoal.testing.launch import ApiProcess
from shoal.testing.sim import running_sim
from tests.scheduler.helpers import fast_config
from tests.util import api_server


@pytest.fixture
def api_options() -> dict[str, Any]:
    """``api_server``'s options for ``api`` (``start_api``'s, or ``security``): a module
    overrides this fixture where its tests need another API."""
    return {}


@pytest.fixture
async def api(api_options: dict[str, Any]) -> AsyncIterator[ApiServer]:
    """The API on an in-memory SQLite store, on a free loopback port, secured as under
    ``shoal up``: tokens, RBAC with its default roles, sealed secrets, anonymous refused."""
    async with api_server(**api_options) as server:
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


HttpOf = Callable[[str], httpx.AsyncClient]


@pytest.fixture
async def http_of(api: ApiServer) -> AsyncIterator[HttpOf]:
    """``http_of("alice")``: a bare HTTP client on the API (no Shoal client code, as any
    Krake script would use) with the token ``shoal up`` gives that user or component."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    made: dict[str, httpx.AsyncClient] = {}

    def of(user: str) -> httpx.AsyncClient:
        if user not in made:
            headers = {"authorization": f"Bearer {shipped.token(user)}"}
            made[user] = httpx.AsyncClient(base_url=api.url, timeout=30, limits=limits,
                                           headers=headers)  # fmt: skip
        return made[user]

    try:
        yield of
    finally:
        for each in made.values():
            await each.aclose()


@pytest.fixture
def http(http_of: HttpOf) -> httpx.AsyncClient:
    """A bare HTTP client on the API with the administrator's token."""
    return http_of(shipped.ADMIN)


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


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """What ``sim`` starts (``start_sim``'s keywords): a folder's conftest or a module
    overrides this fixture where its tests need other clusters."""
    return dict(clusters=["de", "fr"], nodes=2, pod_start_delay=0.1)


@pytest.fixture
async def sim(
    request: pytest.FixtureRequest, sim_options: dict[str, Any]
) -> AsyncIterator[SimServer]:
    """``shoal sim``'s clusters in this process, stopped after. A test given
    ``@pytest.mark.parametrize("sim", [{...}], indirect=True)`` changes some options."""
    async with running_sim(**{**sim_options, **getattr(request, "param", {})}) as server:
        yield server


ClientOf = Callable[[str], ShoalClient]


@dataclass
class ControlPlane:
    """What ``running_control_plane`` started, in start order in ``parts``."""

    scheduler: Scheduler
    observer: ClusterObserver
    controller: KubeController | None
    parts: list[Any]


@contextlib.asynccontextmanager
async def running_control_plane(
    client_of: ClientOf,
    *,
    config: SchedulerConfig | None = None,
    observer: dict[str, Any] | None = None,
    controller: dict[str, Any] | None = None,
    kube_controller: bool = True,
    more: Sequence[Callable[[ClientOf], Any]] = (),
) -> AsyncIterator[ControlPlane]:
    """The cluster observer, the kube controller and the scheduler (``fast_config()``
    unless ``config``) with the tests' short timings, each as itself through
    ``client_of``, then the ``more`` parts made from ``client_of``; stopped in reverse.
    ``kube_controller=False`` where a test starts its own."""
    obs = ClusterObserver(client_of("cluster-observer"),
                          **{"interval": 0.3, "timeout": 0.5, **(observer or {})})  # fmt: skip
    ctl = None
    if kube_controller:
        options = {"poll_interval": 0.2, "timeout": 1.0, **(controller or {})}
        ctl = KubeController(client_of("kube-controller"), **options)
    sch = Scheduler(client_of("scheduler"), config or fast_config())
    parts: list[Any] = [obs, *([ctl] if ctl is not None else []), sch]
    parts += [make(client_of) for make in more]
    started: list[Any] = []
    try:
        for part in parts:
            await part.start()
            started.append(part)
        yield ControlPlane(scheduler=sch, observer=obs, controller=ctl, parts=parts)
    finally:
        for part in reversed(started):
            await part.stop()


@pytest.fixture
def control_plane_options() -> dict[str, Any]:
    """``running_control_plane``'s options for ``control_plane``: a folder or module
    overrides this fixture (asking for ``clusters`` there starts them first)."""
    return {}


@pytest.fixture
async def control_plane(
    client_of: shipped.Callers, control_plane_options: dict[str, Any]
) -> AsyncIterator[ControlPlane]:
    """The observer, the kube controller and the scheduler on the suite's API."""
    async with running_control_plane(client_of, **control_plane_options) as plane:
        yield plane
