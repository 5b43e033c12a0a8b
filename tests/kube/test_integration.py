"""Scheduler + KubeController + ClusterObserver against two `shoal sim` clusters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import NotFound, ShoalClient
from shoal.kube.controller import KubeController
from shoal.model.base import ResourceRef
from shoal.model.kubernetes import (
    KUBE_FINALIZER,
    Application,
    ApplicationState,
    Cluster,
    ClusterState,
)
from shoal.scheduler.scheduler import Scheduler
from shoal.sim.server import SimServer
from shoal.testing.shipped import Callers
from tests.conftest import ControlPlane
from tests.kube.conftest import NS, application, running_on
from tests.scheduler.helpers import fast_config
from tests.util import started, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def controller(
    client: ShoalClient, client_of: Callers, clusters: list[Cluster]
) -> AsyncIterator[KubeController]:
    ctl = KubeController(client_of("kube-controller"), poll_interval=0.2, timeout=2.0)
    async with started(ctl):
        yield ctl


@pytest.fixture
def control_plane_options(controller: KubeController) -> dict[str, Any]:
    """The observer and the scheduler beside the module's own kube controller."""
    return {"kube_controller": False, "observer": {"timeout": 1.0}}


async def _deployment(kube: KubeCluster, name: str) -> dict[str, Any] | None:
    return await kube.read(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}, NS
    )


async def _ready(kube: KubeCluster, name: str) -> bool:
    dep = await _deployment(kube, name)
    if dep is None:
        return False
    return bool((dep.get("status") or {}).get("readyReplicas") == dep["spec"]["replicas"])


async def _app(client: ShoalClient, name: str) -> Application:
    return await client.get(Application, name, NS)


async def test_deploy_and_delete(
    client: ShoalClient,
    kube: dict[str, KubeCluster],
    controller: KubeController,
    control_plane: ControlPlane,
) -> None:
    await client.create(application("web", labels=["location is FR"]))

    async def running() -> Application | None:
        app = await _app(client, "web")
        return app if app.status.state is ApplicationState.RUNNING else None

    app = await wait_for(running, timeout=15, message="web RUNNING")
    assert app.status.running_on is not None and app.status.running_on.name == "fr"
    assert app.status.scheduled_to == app.status.running_on
    assert KUBE_FINALIZER in app.metadata.finalizers
    assert app.status.last_applied_manifest == app.spec.manifest
    assert app.status.container_health.desired_pods == 2
    assert app.status.container_health.running_pods == 2
    assert await _ready(kube["fr"], "web")
    assert await _deployment(kube["de"], "web") is None
    # the scheduler's explanation is stored, and not kept by the kube controller
    assert app.status.scheduling and app.status.scheduling.get("summary")

    def cached() -> Application | None:
        seen = controller.app_informer.get("web", NS)
        return seen if seen is not None and seen.status.running_on is not None else None

    seen = await wait_for(cached, timeout=5, message="RUNNING in the controller's cache")
    assert seen.status.scheduling is None

    # the observer reports nodes and keeps the cluster ONLINE
    cluster = await client.get(Cluster, "fr", NS)
    assert cluster.status.state is ClusterState.ONLINE
    totals = cluster.status.node_summary[0]
    assert totals["count"] == 2 and totals["ready"] == 2
    assert {n.get("name") for n in cluster.status.node_summary[1:]} == {
        n["metadata"]["name"] for n in (await kube["fr"].request("GET", "/api/v1/nodes"))["items"]
    }

    await client.delete(Application, "web", NS)

    async def gone() -> bool:
        try:
            await _app(client, "web")
        except NotFound:
            return True
        # the application may not go before its Deployment is gone from the cluster
        return False

    await wait_for(gone, timeout=10, message="application removed")
    assert await _deployment(kube["fr"], "web") is None


async def test_unreachable_cluster_moves_application(
    client: ShoalClient,
    sim: SimServer,
    kube: dict[str, KubeCluster],
    control_plane: ControlPlane,
) -> None:
    await client.create(application("api", labels=["location in (DE, FR)"]))
    first = await wait_for(lambda: running_on(client, "api"), timeout=15, message="api RUNNING")
    other = "fr" if first == "de" else "de"
    sim.clusters.set_unreachable(first, True)

    async def offline() -> bool:
        cluster = await client.get(Cluster, first, NS)
        return cluster.status.state is ClusterState.OFFLINE

    await wait_for(offline, timeout=10, message=f"{first} OFFLINE")

    async def moved() -> bool:
        return await running_on(client, "api") == other

    await wait_for(moved, timeout=20, message=f"api RUNNING on {other}")
    assert await _ready(kube[other], "api")

    # back online: CONNECTING for one pass, then ONLINE
    sim.clusters.set_unreachable(first, False)

    async def online() -> bool:
        cluster = await client.get(Cluster, first, NS)
        return cluster.status.state is ClusterState.ONLINE

    await wait_for(online, timeout=10, message=f"{first} ONLINE again")


async def test_migration_keeps_old_copy_until_new_is_ready(
    client: ShoalClient,
    sim: SimServer,
    kube: dict[str, KubeCluster],
    controller: KubeController,
) -> None:
    """Without the scheduler: bind by hand to de, then to fr."""
    for name in ("de", "fr"):  # pods start slowly on the new cluster: a visible window
        sim.clusters.cluster(name).pod_start_delay = 1.0
    app = await client.create(application("mig", replicas=2))
    de = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="de")
    fr = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="fr")
    await client.bind(app, de)

    async def mig_on(name: str) -> bool:
        return await running_on(client, "mig") == name

    await wait_for(lambda: mig_on("de"), timeout=15, message="mig RUNNING on de")
    await client.bind(await _app(client, "mig"), fr)

    window_seen = False

    async def migrated() -> bool:
        nonlocal window_seen
        # old copy first, then the new one: "old gone" must imply "new ready"
        old = await _deployment(kube["de"], "mig")
        new_ready = await _ready(kube["fr"], "mig")
        current = await _app(client, "mig")
        if old is None:
            assert new_ready, "the old copy was deleted before the new one was ready"
        elif not new_ready and current.status.state is ApplicationState.MIGRATING:
            window_seen = True
            assert current.status.running_on is not None
            assert current.status.running_on.name == "de"
        return await mig_on("fr")

    await wait_for(migrated, timeout=15, interval=0.05, message="mig RUNNING on fr")
    assert window_seen, "never saw MIGRATING with the old copy alive and the new one not ready"
    assert await _deployment(kube["de"], "mig") is None
    assert await _ready(kube["fr"], "mig")


async def test_a_burst_to_a_slow_cluster_is_applied_all_at_once(
    client: ShoalClient, client_of: Callers, sim: SimServer, kube: dict[str, KubeCluster]
) -> None:
    """An apply mostly waits on its member cluster. With every answer of ``fr`` a second
    late, the applications of a burst there are all in the controller's hands at once (its
    default workers), not a few dozen at a time, and each runs there once."""
    sim.clusters.set_latency("fr", 1.0)
    controller = KubeController(client_of("kube-controller"), poll_interval=0.2)
    scheduler = Scheduler(
        client_of("scheduler"), fast_config()
    )  # no observer: fr is slow, not gone
    await controller.start()
    await scheduler.start()
    try:
        names = [f"burst-{i:03}" for i in range(150)]
        created = await client.create_many(
            [application(name, labels=["location is FR"], replicas=1) for name in names]
        )
        assert all(isinstance(app, Application) for app in created), created
        peak = await wait_for(
            lambda: controller.queue.in_progress >= 120 and controller.queue.in_progress,
            timeout=30,
            message="120 applications in the controller's hands at once",
        )
        assert peak > 64  # the former default number of workers

        async def all_running() -> bool:
            return all([await running_on(client, name) == "fr" for name in names])

        await wait_for(all_running, timeout=90, interval=0.5, message="150 RUNNING on fr")
        sim.clusters.set_latency("fr", 0.0)
        for cluster, expected in (("fr", names), ("de", [])):
            path = await kube[cluster].collection("apps/v1", "Deployment", NS)
            listed = (await kube[cluster].request("GET", path))["items"]
            assert sorted(d["metadata"]["name"] for d in listed) == expected, cluster
    finally:
        await scheduler.stop()
        await controller.stop()
