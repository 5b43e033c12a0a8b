"""The API restarted (a process, SIGKILLed, started again on its SQLite file) while a pull
cluster's copies change: afterwards the member cluster holds exactly what the hub says,
read through the member's own API, and the agent resumed its watch of its Copies from the
revision it had seen rather than listing them all again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shoal.agent import joining
from shoal.client.rest import Conflict, ShoalClient
from shoal.kube.controller import KubeController
from shoal.model.kubernetes import Application
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import builders, launch, shipped
from shoal.testing.wait import wait_for
from tests.pull.conftest import LEASE, NS, Hub, Member, online
from tests.pull.test_pull_reconnect import app_on, deployments, settled
from tests.scheduler.helpers import fast_config

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]

RELIST = "copies: listing again"
"""What the agent's informer logs when it lists its Copies again instead of watching on."""
CUT = "copies: watch interrupted"
"""What it logs (debug) when its watch of its Copies is cut."""


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    """The API as ``shoal up --tls`` runs it, a process on a SQLite file (so that it can be
    killed and started again), with the scheduler, kube controller and observer here."""
    store = f"sqlite://{tmp_path / 'shoal.db'}"
    api = launch.ApiProcess(store, tls=True, kube_finalizer=True, log=tmp_path / "api.log")
    await api.wait_ready()
    directory = shipped.setup().directory
    ca = (directory / "ca.crt").read_text()

    def client(user: str) -> ShoalClient:
        return ShoalClient(api.url, token=shipped.token(user), ssl_context=joining.trust(ca))

    admin = client("admin")
    clients = [client(user) for user in ("cluster-observer", "kube-controller", "scheduler")]
    parts = (
        ClusterObserver(clients[0], interval=0.3, timeout=0.5, lease=LEASE),
        KubeController(clients[1], poll_interval=0.2, timeout=1.0),
        Scheduler(clients[2], fast_config()),
    )
    for part in parts:
        await part.start()
    hub = Hub(api, admin, ca, directory, store, shipped.security())
    try:
        yield hub
    finally:
        for part in reversed(parts):
            await part.stop()
        for each in (*clients, admin):
            await each.close()
        assert isinstance(hub.server, launch.ApiProcess)
        launch.kill(hub.server.proc)


async def restart(hub: Hub, tmp_path: Path, down: float) -> None:
    """SIGKILL the API, keep it down ``down`` seconds, start it again where it listened."""
    old = hub.server
    assert isinstance(old, launch.ApiProcess)
    launch.kill(old.proc)
    await asyncio.sleep(down)  # the agent's and the controllers' connections are refused
    hub.server = launch.ApiProcess(old.store, tls=True, kube_finalizer=True, port=old.port,
                                   log=tmp_path / "api.log")  # fmt: skip
    await hub.server.wait_ready()


async def scaled(hub: Hub, name: str, replicas: int) -> None:
    """The application's Deployment given ``replicas``: read and written again until no
    controller's status write came between."""

    async def written() -> bool:
        app = await hub.admin.get(Application, name, NS)
        app.spec.manifest = [builders.deployment(name, "nginx:1", replicas=replicas)]
        try:
            await hub.admin.update(app)
        except Conflict:
            return False
        return True

    await wait_for(written, timeout=30)


async def test_the_member_holds_what_the_hub_says_after_api_restarts(
    hub: Hub, members: Any, tmp_path: Path
) -> None:
    edge: Member = await members("edge", site="edge")
    edge.kill()  # again, telling what its watches do (debug)
    edge.log_level = "debug"
    edge.start()
    for name in ("a1", "a2", "a3"):
        await hub.admin.create(app_on(name, 1))
    await wait_for(lambda: settled(hub, {"a1": 1, "a2": 1, "a3": 1}), timeout=60)
    assert await deployments(edge) == {"a1": 1, "a2": 1, "a3": 1}

    # changes the API acknowledged just before it dies: the hub and the agent meet them
    # only after the restart
    await hub.admin.delete(Application, "a1", NS)
    await scaled(hub, "a2", 3)
    await hub.admin.create(app_on("a4", 2))
    await restart(hub, tmp_path, down=2.0)

    # and changes after it: the watch that resumed carries them
    await wait_for(lambda: online(hub, "edge"), timeout=60)
    await hub.admin.delete(Application, "a3", NS)
    await hub.admin.create(app_on("a5", 1))
    await scaled(hub, "a4", 1)
    await restart(hub, tmp_path, down=0.5)  # once more, at once

    wanted = {"a2": 3, "a4": 1, "a5": 1}
    await wait_for(lambda: settled(hub, wanted), timeout=90)

    async def exactly() -> bool:
        return await deployments(edge) == wanted

    await wait_for(exactly, timeout=60)
    copies = await hub.admin.request("GET", f"/kubernetes/namespaces/{NS}/copies")
    assert sorted(c["metadata"]["name"] for c in copies["items"]) == [
        "a2:edge", "a4:edge", "a5:edge"
    ]  # fmt: skip
    log = edge.log.read_text()
    # the agent listed its Copies once, at its start; its watch was cut at each restart
    # and resumed from the revision it had seen (SQLite keeps the history), never by a
    # listing again
    assert log.count(CUT) >= 2, log[-3000:]
    assert RELIST not in log, log[-3000:]

