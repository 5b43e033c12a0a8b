"""The clean-ups' decisions, in the order a controller meets them, audited on sim clusters.

An application moving off a cluster still runs there until its new copy runs: a prune of
that cluster keeps the copy. A copy left behind on a cluster that did not answer is
removed when it answers, unless the application came back to it meanwhile: then only what
its manifest no longer has goes, and the copy it runs there is never deleted.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.copies.owners import LABEL_NAME, LABEL_NAMESPACE, LABEL_UID, Owner
from shoal.kube import removal
from shoal.kube.controller import KubeController
from shoal.model.base import ResourceRef
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.sim.server import SimServer
from shoal.testing.shipped import Callers
from tests.kube.conftest import NS, deployment
from tests.util import started, wait_for

pytestmark = pytest.mark.integration

DE = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="de")
FR = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="fr")


@pytest.fixture
async def controller(client_of: Callers, clusters: list[Cluster]) -> AsyncIterator[KubeController]:
    ctl = KubeController(client_of("kube-controller"), poll_interval=0.2, resync=60.0,
                         timeout=2.0, cleanup_retry=0.5)  # fmt: skip
    async with started(ctl):
        yield ctl


def config(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"k": "v"}}  # fmt: skip


def account(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}


async def status_of(client: ShoalClient, name: str) -> Any:
    return (await client.get(Application, name, NS)).status


async def running_on(client: ShoalClient, name: str, cluster: str) -> bool:
    status = await status_of(client, name)
    return (status.state is ApplicationState.RUNNING and status.running_on is not None
            and status.running_on.name == cluster)  # fmt: skip


async def running_there(
    client: ShoalClient, name: str, manifest: list[dict[str, Any]], cluster: ResourceRef
) -> Application:
    """Application ``name`` made with ``manifest``, bound to ``cluster`` and RUNNING there."""
    app = await client.create(Application.model_validate({
        "metadata": {"name": name, "namespace": NS}, "spec": {"manifest": manifest}}))  # fmt: skip
    await client.bind(app, cluster)
    await wait_for(lambda: running_on(client, name, cluster.name), timeout=20,
                   message=f"{name} on {cluster.name}")  # fmt: skip
    return app


async def uid_on(kube: KubeCluster, obj: dict[str, Any]) -> str | None:
    live = await kube.read(obj, NS)
    return None if live is None else str(live["metadata"]["uid"])


async def test_a_prune_keeps_the_copy_of_an_application_still_leaving_the_cluster(
    client: ShoalClient,
    controller: KubeController,
    sim: SimServer,
    clusters: list[Cluster],
    kube: dict[str, KubeCluster],
) -> None:
    """Bound elsewhere, still running here (its new cluster does not answer): kept; an
    object of an application that is gone, and one of an application that never used the
    cluster, are removed."""
    await running_there(
        client, "moving", [deployment("moving", replicas=1), account("moving-sa")], DE
    )
    other = await running_there(client, "elsewhere", [config("elsewhere")], FR)
    de = kube["de"]
    gone_app = {**config("left-by-gone"), "metadata": {"name": "left-by-gone", "labels": {
        LABEL_NAMESPACE: NS, LABEL_NAME: "gone", LABEL_UID: "uid-gone"}}}  # fmt: skip
    assert other.metadata.uid is not None
    not_here = {**config("not-used-here"), "metadata": {"name": "not-used-here",
                "labels": Owner(NS, "elsewhere", other.metadata.uid).labels}}  # fmt: skip
    for obj in (gone_app, not_here):
        await de.request("POST", f"/api/v1/namespaces/{NS}/configmaps", body=obj)
    # a kind only an application's manifest names (not one of the common workload kinds)
    gone_account = {**account("left-sa"), "metadata": {"name": "left-sa",
                    "labels": gone_app["metadata"]["labels"]}}  # fmt: skip
    await de.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", body=gone_account)
    kept = await uid_on(de, deployment("moving"))

    sim.clusters.set_unreachable("fr")
    try:
        await client.bind(await client.get(Application, "moving", NS), FR)

        async def leaving() -> bool:
            status = await status_of(client, "moving")
            return (
                status.scheduled_to is not None
                and status.scheduled_to.name == "fr"
                and status.running_on is not None
                and status.running_on.name == "de"
            )

        await wait_for(leaving, timeout=20, message="moving bound to fr, still on de")
        cluster = next(c for c in clusters if c.metadata.name == "de")
        await removal.prune(controller, await controller.applier_of(cluster))
        assert await uid_on(de, deployment("moving")) == kept
        assert await de.read(gone_app, NS) is None
        assert await de.read(not_here, NS) is None
        assert await de.read(gone_account, NS) is None
        assert await de.read(account("moving-sa"), NS) is not None
        assert await leaving()
    finally:
        sim.clusters.set_unreachable("fr", False)


async def test_a_pending_clean_up_leaves_the_live_copy_of_an_application_that_came_back(
    client: ShoalClient,
    controller: KubeController,
    sim: SimServer,
    kube: dict[str, KubeCluster],
) -> None:
    """Moved off de while de did not answer, then back to de with a manifest that no
    longer has its ConfigMap: the clean-up pending on de removes the ConfigMap only; the
    Deployment running there is the same object throughout."""
    await running_there(
        client, "back", [deployment("back", replicas=1), config("back-old")], DE
    )
    de, fr = kube["de"], kube["fr"]
    first = await uid_on(de, deployment("back"))
    assert first is not None and await uid_on(de, config("back-old")) is not None

    sim.clusters.set_unreachable("de")
    try:
        await client.bind(await client.get(Application, "back", NS), FR)
        await wait_for(lambda: running_on(client, "back", "fr"), timeout=30, message="on fr")

        async def pending_on_de() -> bool:
            cleanups = (await status_of(client, "back")).pending_cleanups
            return any(entry["cluster"]["name"] == "de" for entry in cleanups)

        await wait_for(pending_on_de, timeout=20, message="a clean-up pending on de")
        moved = await client.get(Application, "back", NS)
        moved.spec.manifest = [deployment("back", replicas=1)]
        await client.update(moved)
        await client.bind(await client.get(Application, "back", NS), DE)
    finally:
        sim.clusters.set_unreachable("de", False)

    async def settled() -> bool:
        status = await status_of(client, "back")
        return (await running_on(client, "back", "de") and not status.pending_cleanups
                and await fr.read(deployment("back"), NS) is None)  # fmt: skip

    await wait_for(settled, timeout=30, message="back on de, nothing pending, gone from fr")
    assert await uid_on(de, deployment("back")) == first
    assert await de.read(config("back-old"), NS) is None


async def test_a_migration_leaves_the_copy_of_an_application_placed_back_while_it_removed_it(
    client: ShoalClient,
    client_of: Callers,
    sim: SimServer,
    kube: dict[str, KubeCluster],
) -> None:
    """Moved to fr; de answers slowly, and the application is placed on de again while the
    removal of its copy there waits for de's answer: that copy is its live one, kept (the
    same Deployment throughout), and only fr's goes."""
    ctl = KubeController(client_of("kube-controller"), poll_interval=0.2, resync=60.0,
                         timeout=10.0, cleanup_retry=0.5)  # fmt: skip
    await ctl.start()
    try:
        app = await client.create(Application.model_validate({
            "metadata": {"name": "turned", "namespace": NS},
            "spec": {"manifest": [deployment("turned", replicas=1)]}}))  # fmt: skip
        await client.bind(app, DE)
        await wait_for(lambda: running_on(client, "turned", "de"), timeout=20, message="on de")
        de, fr = kube["de"], kube["fr"]
        first = await uid_on(de, deployment("turned"))
        assert first is not None
        requests = sim.clusters.cluster("de").requests
        since = time.time()
        sim.clusters.set_latency("de", 2.0)
        try:
            await client.bind(await client.get(Application, "turned", NS), FR)

            def removing() -> bool:
                # the removal's first request reached de (and waits there for its answer)
                asked = [r for r in list(requests) if r["time"] >= since]
                return any(r["method"] == "DELETE" or r["path"] == "/version" for r in asked)

            await wait_for(removing, timeout=30, message="the removal from de under way")
            await client.bind(await client.get(Application, "turned", NS), DE)
        finally:
            sim.clusters.set_latency("de", 0.0)

        async def settled() -> bool:
            status = await status_of(client, "turned")
            return (await running_on(client, "turned", "de") and not status.pending_cleanups
                    and await fr.read(deployment("turned"), NS) is None)  # fmt: skip

        await wait_for(settled, timeout=30, message="back on de, nothing pending, gone from fr")
        assert await uid_on(de, deployment("turned")) == first
    finally:
        await ctl.stop()


async def test_a_pending_clean_up_removes_the_whole_copy_once_the_cluster_answers(
    client: ShoalClient,
    controller: KubeController,
    sim: SimServer,
    kube: dict[str, KubeCluster],
) -> None:
    """The cluster it left did not answer: the copy there stays pending, and goes (all of
    it, and nothing of another application) once the cluster answers."""
    await running_there(
        client, "left", [deployment("left", replicas=1), config("left-config")], DE
    )
    await running_there(client, "stays", [config("stays")], DE)
    de = kube["de"]
    sim.clusters.set_unreachable("de")
    try:
        await client.bind(await client.get(Application, "left", NS), FR)
        await wait_for(lambda: running_on(client, "left", "fr"), timeout=30, message="on fr")

        async def pending() -> bool:
            return bool((await status_of(client, "left")).pending_cleanups)

        await wait_for(pending, timeout=20, message="a clean-up pending on de")
    finally:
        sim.clusters.set_unreachable("de", False)

    async def cleaned() -> bool:
        return (not (await status_of(client, "left")).pending_cleanups
                and await de.read(deployment("left"), NS) is None
                and await de.read(config("left-config"), NS) is None)  # fmt: skip

    await wait_for(cleaned, timeout=30, message="left's copy removed from de")
    assert await de.read(config("stays"), NS) is not None
    assert await kube["fr"].read(deployment("left"), NS) is not None
