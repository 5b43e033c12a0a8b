"""Observer, scheduler and kube controller together against `shoal sim` clusters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import NotFound, ShoalClient
from shoal.gc.controller import GarbageCollector
from shoal.model.base import Metadata
from shoal.model.constraints import MetricRef
from shoal.model.core import GlobalMetricsProvider
from shoal.model.kubernetes import Application, Cluster, ClusterSpec, ClusterState
from shoal.observer.controller import ClusterObserver
from shoal.sim.server import SimServer
from shoal.testing.shipped import Callers
from shoal.testing.sim import running_sim
from tests.conftest import ClientOf, running_control_plane
from tests.kube.conftest import NS, application, running_on
from tests.scheduler.helpers import fast_config, metric, provider
from tests.util import until_gone, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _dep(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}


async def _ready(kube: KubeCluster, name: str) -> bool:
    dep = await kube.read(_dep(name), NS)
    if dep is None:
        return False
    return bool((dep.get("status") or {}).get("readyReplicas") == dep["spec"]["replicas"])


async def _state(client: ShoalClient, name: str) -> ClusterState:
    return (await client.get(Cluster, name, NS)).status.state


# the observer looks often, and an application's copy left behind is retried soon
TIMINGS: dict[str, Any] = {"observer": {"interval": 0.2, "timeout": 1.0},
                           "controller": {"cleanup_retry": 0.5}}  # fmt: skip


def garbage_collector(client_of: ClientOf) -> GarbageCollector:
    return GarbageCollector(client_of("garbage-collector"))


async def test_a_registered_cluster_is_connecting_until_the_observer_reaches_it(
    client: ShoalClient, client_of: Callers, sim: SimServer
) -> None:
    reachable = Cluster(
        metadata=Metadata(name="new", namespace=NS),
        spec=ClusterSpec(kubeconfig=sim.clusters.kubeconfig("de")),
    )
    created = await client.create(reachable)
    assert created.status.state is ClusterState.CONNECTING
    gone = sim.clusters.kubeconfig("fr")
    sim.clusters.set_unreachable("fr")
    lost = await client.create(
        Cluster(metadata=Metadata(name="lost", namespace=NS), spec=ClusterSpec(kubeconfig=gone))
    )
    assert lost.status.state is ClusterState.CONNECTING
    # A long interval: only the observer's first pass on each new cluster can count.
    observer = ClusterObserver(client_of("cluster-observer"), interval=60.0, timeout=0.5)
    await observer.start()
    try:
        await wait_for(
            lambda: _is(client, "new", ClusterState.ONLINE), timeout=2, message="new ONLINE"
        )
        await wait_for(
            lambda: _is(client, "lost", ClusterState.OFFLINE), timeout=5, message="lost OFFLINE"
        )
    finally:
        await observer.stop()


async def _is(client: ShoalClient, name: str, state: ClusterState) -> bool:
    return await _state(client, name) is state


async def test_observer_notready_unhealthy_online(
    client: ShoalClient, client_of: Callers, sim: SimServer, clusters: list[Cluster]
) -> None:
    observer = ClusterObserver(client_of("cluster-observer"), interval=0.1, timeout=1.0)
    await observer.start()
    try:

        async def state_is(wanted: ClusterState) -> bool:
            return await _state(client, "de") is wanted

        await wait_for(lambda: state_is(ClusterState.ONLINE), timeout=5, message="ONLINE")
        for node in ("n-0", "n-1"):
            sim.clusters.set_node_fault("de", node, not_ready=True)
        await wait_for(lambda: state_is(ClusterState.NOTREADY), timeout=5, message="NOTREADY")
        cluster = await client.get(Cluster, "de", NS)
        assert cluster.status.node_summary[0]["ready"] == 0
        sim.clusters.clear_faults("de")
        await wait_for(lambda: state_is(ClusterState.ONLINE), timeout=5, message="ONLINE again")

        sim.clusters.set_node_fault("de", "n-1", memory_pressure=True)
        await wait_for(lambda: state_is(ClusterState.UNHEALTHY), timeout=5, message="UNHEALTHY")
        cluster = await client.get(Cluster, "de", NS)
        entries = cluster.status.node_summary[1:]
        assert [n.get("pressure") for n in entries] == [None, ["MemoryPressure"]]
        sim.clusters.clear_faults("de")
        await wait_for(lambda: state_is(ClusterState.ONLINE), timeout=5, message="ONLINE again")
        assert await _state(client, "fr") is ClusterState.ONLINE
    finally:
        await observer.stop()


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": True, "storage": True}],
    },
}


async def test_crd_on_a_cluster_makes_an_application_schedulable(
    client: ShoalClient, client_of: Callers, kube: dict[str, KubeCluster]
) -> None:
    # a long backoff: only the cluster change can wake the application in time
    backoff = {"initial": 30, "factor": 1, "cap": 30}
    async with running_control_plane(
        client_of, config=fast_config(backoff=backoff, retries=50), **TIMINGS
    ):
        app = application("needs-crd")
        app.spec.constraints.cluster.custom_resources = ["widgets.example.com"]
        app.spec.manifest.append(
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        )
        await client.create(app)

        async def waiting() -> bool:
            current = await client.get(Application, "needs-crd", NS)
            return current.status.scheduler_retries is not None

        await wait_for(waiting, timeout=5, message="needs-crd waiting for a cluster")
        await kube["fr"].request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CRD
        )

        async def listed() -> bool:
            cluster = await client.get(Cluster, "fr", NS)
            return cluster.status.custom_resources == ["widgets.example.com"]

        await wait_for(listed, timeout=5, message="CRD in status.custom_resources")
        await wait_for(
            lambda: running_on(client, "needs-crd"), timeout=8, message="needs-crd RUNNING"
        )
        assert await running_on(client, "needs-crd") == "fr"
        widget = await kube["fr"].read(
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}, NS
        )
        assert widget is not None
        assert (await client.get(Cluster, "de", NS)).status.custom_resources == []


async def test_deleting_a_cluster_reschedules_its_applications(
    client: ShoalClient, client_of: Callers, kube: dict[str, KubeCluster]
) -> None:
    async with running_control_plane(client_of, more=[garbage_collector], **TIMINGS):
        await client.create(application("stay", labels=["location in (DE, FR)"]))
        first = await wait_for(lambda: running_on(client, "stay"), timeout=10, message="RUNNING")
        other = "fr" if first == "de" else "de"
        await client.delete(Cluster, first, NS)

        async def moved() -> bool:
            return await running_on(client, "stay") == other

        await wait_for(moved, timeout=10, message=f"stay RUNNING on {other}")
        assert await _ready(kube[other], "stay")
        with pytest.raises(NotFound):
            await client.get(Cluster, first, NS)


@pytest.fixture
async def sim3() -> AsyncIterator[SimServer]:
    async with running_sim(clusters=["a", "b", "c"], nodes=2, pod_start_delay=0.5) as server:
        yield server


async def test_end_to_end_three_clusters(
    client: ShoalClient, client_of: Callers, sim3: SimServer
) -> None:
    """Constraints, a metric change migrates, an outage moves, the old copy and delete clean up."""
    await client.create(provider("static", {"green-a": 0.9, "green-b": 0.1, "green-c": 1.0}))
    for name in ("green-a", "green-b", "green-c"):
        await client.create(metric(name))
    clients = KubeClients(timeout=2.0)
    kube: dict[str, KubeCluster] = {}
    for name, location in (("a", "DE"), ("b", "DE"), ("c", "FR")):
        cluster = await client.create(
            Cluster(
                metadata=Metadata(name=name, namespace=NS, labels={"location": location}),
                spec=ClusterSpec(
                    kubeconfig=sim3.clusters.kubeconfig(name),
                    metrics=[MetricRef(name=f"green-{name}", weight=1)],
                ),
            )
        )
        kube[name] = await clients.get(cluster)
    try:
        config = fast_config(metrics_refresh=0.2, reschedule_after=0.5)
        async with running_control_plane(client_of, config=config, **TIMINGS):
            # c scores best but is in FR: the constraint puts it on a
            await client.create(application("e2e", labels=["location is DE"]))
            await wait_for(lambda: running_on(client, "e2e"), timeout=10, message="RUNNING")
            assert await running_on(client, "e2e") == "a"
            assert await _ready(kube["a"], "e2e")
            assert await kube["c"].read(_dep("e2e"), NS) is None

            # the metric changes: it migrates to b; a's copy goes only once b's is ready
            static = await client.get(GlobalMetricsProvider, "static")
            assert static.spec.static is not None
            static.spec.static.metrics = {"green-a": 0.1, "green-b": 0.9, "green-c": 1.0}
            await client.update(static)

            async def migrated() -> bool:
                old = await kube["a"].read(_dep("e2e"), NS)
                if old is None:
                    assert await _ready(kube["b"], "e2e"), "old copy deleted before new ready"
                return await running_on(client, "e2e") == "b"

            await wait_for(migrated, timeout=15, interval=0.05, message="e2e RUNNING on b")
            assert await kube["a"].read(_dep("e2e"), NS) is None

            # b becomes unreachable: it moves back to a; b's copy is removed when b returns
            sim3.clusters.set_unreachable("b", True)

            async def moved() -> bool:
                return await running_on(client, "e2e") == "a"

            await wait_for(moved, timeout=20, message="e2e RUNNING on a")
            assert await _ready(kube["a"], "e2e")
            app = await client.get(Application, "e2e", NS)
            assert [e["cluster"]["name"] for e in app.status.pending_cleanups] == ["b"]
            assert await _state(client, "b") is ClusterState.OFFLINE
            # a favoured from now on, so that it stays there when b comes back
            static = await client.get(GlobalMetricsProvider, "static")
            assert static.spec.static is not None
            static.spec.static.metrics = {"green-a": 0.9, "green-b": 0.1, "green-c": 1.0}
            await client.update(static)
            sim3.clusters.set_unreachable("b", False)

            async def cleaned() -> bool:
                app = await client.get(Application, "e2e", NS)
                gone = await kube["b"].read(_dep("e2e"), NS) is None
                return gone and not app.status.pending_cleanups

            await wait_for(cleaned, timeout=15, message="b's old copy removed")
            assert await running_on(client, "e2e") == "a"

            # deleting the application removes everything from every cluster
            await client.delete(Application, "e2e", NS)

            await until_gone(client, Application, "e2e", NS, timeout=10)
            for name in ("a", "b", "c"):
                assert await kube[name].read(_dep("e2e"), NS) is None, name
                pods = await kube[name].request("GET", f"/api/v1/namespaces/{NS}/pods")
                assert pods["items"] == [], name
    finally:
        await clients.close()
