"""The cluster observer learns from watches: faults injected through `shoal sim`'s admin API.

The safety-net re-list is a minute away in every test, so what reaches the
Cluster's status in time came from a watch event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx
import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.events.recorder import KIND_LABEL, NAME_LABEL
from shoal.model.base import ReasonCode
from shoal.model.events import Event
from shoal.model.kubernetes import Application, Cluster, ClusterState
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.sim.server import SimServer
from shoal.testing.shipped import Callers
from tests.kube.conftest import NS, application
from tests.kube.test_control_plane import CRD
from tests.scheduler.helpers import fast_config
from tests.util import wait_for

pytestmark = [pytest.mark.integration]

SAFETY_NET = 60.0  # seconds: no re-list can explain what the tests see


@pytest.fixture
async def observer(
    client: ShoalClient, client_of: Callers, clusters: list[Cluster]
) -> AsyncIterator[ClusterObserver]:
    obs = ClusterObserver(client_of("cluster-observer"), interval=SAFETY_NET, timeout=1.0)
    await obs.start()
    try:
        for name in ("de", "fr"):
            await wait_for(partial(_listed, client, obs, name), timeout=5, message="listed")
        yield obs
    finally:
        await obs.stop()


async def _listed(client: ShoalClient, observer: ClusterObserver, name: str) -> bool:
    watched = observer.watched(NS, name)
    if watched is None or not (watched.nodes.synced and watched.crds.synced):
        return False
    cluster = await client.get(Cluster, name, NS)
    return cluster.status.state is ClusterState.ONLINE and len(cluster.status.nodes) == 2


async def _state_is(client: ShoalClient, name: str, state: ClusterState) -> bool:
    return (await client.get(Cluster, name, NS)).status.state is state


async def _fault(sim: SimServer, cluster: str, body: dict[str, Any] | None = None) -> None:
    """Inject (or, without a body, clear) a fault through the sim's admin API."""
    async with httpx.AsyncClient(base_url=sim.url, headers=sim.admin_headers) as http:
        path = f"/admin/clusters/{cluster}/faults"
        answer = await (http.post(path, json=body) if body else http.delete(path))
        answer.raise_for_status()


def _ready(cluster: Cluster) -> dict[str, str]:
    """Each node's Ready condition, from ``status.nodes`` (Krake's ClusterNode shape)."""
    ready: dict[str, str] = {}
    for node in cluster.status.nodes:
        assert node.status is not None
        ready[node.metadata.name] = next(
            c.status for c in node.status.conditions if c.type == "Ready"
        )
    return ready


async def test_node_faults_reach_the_status_from_the_watch(
    client: ShoalClient, sim: SimServer, observer: ClusterObserver
) -> None:
    watched = observer.watched(NS, "de")
    assert watched is not None
    lists = watched.nodes.lists
    await _fault(sim, "de", {"node": "n-0", "not_ready": True})

    async def one_ready() -> bool:
        cluster = await client.get(Cluster, "de", NS)
        return _ready(cluster) == {"n-0": "False", "n-1": "True"}

    await wait_for(one_ready, timeout=3, interval=0.05, message="n-0 NotReady in status.nodes")
    cluster = await client.get(Cluster, "de", NS)
    assert cluster.status.state is ClusterState.ONLINE  # one Ready node is enough
    assert cluster.status.node_summary[0]["ready"] == 1

    await _fault(sim, "de", {"node": "n-1", "not_ready": True})
    await wait_for(lambda: _state_is(client, "de", ClusterState.NOTREADY), timeout=3, interval=0.05)
    await _fault(sim, "de", {"node": "n-1", "memory_pressure": True, "not_ready": False})
    await wait_for(
        lambda: _state_is(client, "de", ClusterState.UNHEALTHY), timeout=3, interval=0.05
    )
    pressure = (await client.get(Cluster, "de", NS)).status.node_summary[1:]
    assert [n.get("pressure") for n in pressure] == [None, ["MemoryPressure"]]
    await _fault(sim, "de")
    await wait_for(lambda: _state_is(client, "de", ClusterState.ONLINE), timeout=3, interval=0.05)
    assert watched.nodes.lists == lists, "a re-list, not the watch, brought the changes"
    assert await _state_is(client, "fr", ClusterState.ONLINE)


async def test_unreachable_is_offline_until_it_answers_again(
    client: ShoalClient, sim: SimServer, observer: ClusterObserver
) -> None:
    await _fault(sim, "fr", {"unreachable": True})
    await wait_for(lambda: _state_is(client, "fr", ClusterState.OFFLINE), timeout=3, interval=0.05)
    cluster = await client.get(Cluster, "fr", NS)
    assert cluster.status.reason is not None
    assert cluster.status.reason.code is ReasonCode.CLUSTER_NOT_REACHABLE
    assert cluster.status.node_summary[0]["ready"] == 2  # the last seen, not seen now

    async def offline_event() -> Event | None:
        selector = f"{KIND_LABEL}=Cluster,{NAME_LABEL}=fr"
        listed = await client.list(Event, NS, label_selector=selector)
        return next((e for e in listed.items if e.reason == "Offline"), None)

    offline = await wait_for(offline_event, timeout=10, message="the Offline event")
    assert offline.message.startswith("ONLINE → OFFLINE, its API cannot be reached: ")
    assert "nodes ready" not in offline.message, offline.message  # not seen: not told
    await _fault(sim, "fr")
    await wait_for(lambda: _state_is(client, "fr", ClusterState.ONLINE), timeout=5, interval=0.05)
    assert (await client.get(Cluster, "fr", NS)).status.reason is None


async def test_watches_resume_from_their_version_and_list_again_after_410(
    client: ShoalClient, sim: SimServer, observer: ClusterObserver
) -> None:
    watched = observer.watched(NS, "fr")
    assert watched is not None
    store = sim.clusters.cluster("fr").store
    lists = watched.nodes.lists

    async def nodes(names: list[str]) -> bool:
        cluster = await client.get(Cluster, "fr", NS)
        return [n.metadata.name for n in cluster.status.nodes] == names

    store.close_watches()  # the streams end: resumed from the last version, no list
    await _fault(sim, "fr", {"node": "n-0", "removed": True})
    await wait_for(lambda: nodes(["n-1"]), timeout=3, interval=0.05, message="n-0 gone")
    assert watched.nodes.lists == lists
    assert (await client.get(Cluster, "fr", NS)).status.node_summary[0]["count"] == 1

    # disconnected, a change, its history forgotten (all before the loop runs again):
    # the resume gets 410 Gone and lists again
    store.close_watches()
    sim.clusters.clear_faults("fr")
    store.compact()
    await wait_for(lambda: nodes(["n-0", "n-1"]), timeout=3, interval=0.05, message="n-0 back")
    assert watched.nodes.lists == lists + 1


async def test_a_crd_appearing_unblocks_the_application_waiting_for_it(
    client: ShoalClient, client_of: Callers, kube: dict[str, KubeCluster], observer: ClusterObserver
) -> None:
    # a long scheduler back-off: only the cluster's status change can wake the application
    scheduler = Scheduler(
        client_of("scheduler"), fast_config(backoff={"initial": 30, "factor": 1, "cap": 30})
    )
    await scheduler.start()
    try:
        app = application("needs-crd")
        app.spec.constraints.cluster.custom_resources = ["widgets.example.com"]
        await client.create(app)

        async def waiting() -> bool:
            current = await client.get(Application, "needs-crd", NS)
            return current.status.scheduler_attempts > 0 and current.status.scheduled_to is None

        await wait_for(waiting, timeout=5, message="needs-crd waiting for a cluster")
        await kube["fr"].request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CRD
        )

        async def placed() -> str | None:
            current = await client.get(Application, "needs-crd", NS)
            return current.status.scheduled_to.name if current.status.scheduled_to else None

        assert await wait_for(placed, timeout=3, interval=0.05, message="placed") == "fr"
        cluster = await client.get(Cluster, "fr", NS)
        assert cluster.status.custom_resources == ["widgets.example.com"]
        assert (await client.get(Cluster, "de", NS)).status.custom_resources == []
    finally:
        await scheduler.stop()


async def test_a_cluster_whose_nodes_all_go_notready_loses_its_application(
    client: ShoalClient, client_of: Callers, sim: SimServer, observer: ClusterObserver
) -> None:
    scheduler = Scheduler(client_of("scheduler"), fast_config(reschedule_after=60.0))
    await scheduler.start()
    try:
        await client.create(application("movable", labels=["location in (DE, FR)"]))

        async def placed() -> str | None:
            current = await client.get(Application, "movable", NS)
            return current.status.scheduled_to.name if current.status.scheduled_to else None

        first = await wait_for(placed, timeout=5, message="placed")
        other = "fr" if first == "de" else "de"
        for node in ("n-0", "n-1"):
            await _fault(sim, first, {"node": node, "not_ready": True})

        async def moved() -> bool:
            return await placed() == other

        await wait_for(moved, timeout=3, interval=0.05, message=f"movable moved to {other}")
        assert await _state_is(client, first, ClusterState.NOTREADY)
    finally:
        await scheduler.stop()
