"""State that converges after clusters come and go, audited on the member clusters."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Cluster, ClusterSpec
from shoal.sim.server import SimServer
from shoal.testing.builders import register
from shoal.testing.shipped import Callers
from tests.conftest import ControlPlane
from tests.kube.conftest import NS, application, running_on
from tests.kube.test_integration import control_plane_options, controller  # noqa: F401 (fixtures)
from tests.util import until_gone, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def _deployment(kube: KubeCluster, name: str) -> dict[str, Any] | None:
    return await kube.read(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}, NS
    )


@pytest.mark.usefixtures("clusters", "control_plane")
async def test_a_cluster_registered_again_is_a_new_cluster_everywhere(
    client: ShoalClient, sim: SimServer, kube: dict[str, KubeCluster]
) -> None:
    await client.create(application("before", labels=["location is DE"]))
    await wait_for(lambda: running_on(client, "before"), timeout=30, message="before on de")
    await client.delete(Cluster, "de", NS)
    await until_gone(client, Cluster, "de", NS, timeout=30)
    again = Cluster(
        metadata=Metadata(name="de", namespace=NS, labels={"location": "DE"}),
        spec=ClusterSpec(kubeconfig=sim.clusters.kubeconfig("de")),
    )
    await register(client, again)
    await client.create(application("after", labels=["location is DE"]))
    assert await wait_for(lambda: running_on(client, "after"), timeout=30,
                          message="after RUNNING on de registered again") == "de"  # fmt: skip
    deployment = await _deployment(kube["de"], "after")
    assert deployment is not None
    assert deployment["status"].get("readyReplicas") == deployment["spec"]["replicas"]


async def test_a_graceful_cluster_delete_leaves_nothing_behind(
    client: ShoalClient,
    sim: SimServer,
    clusters: list[Cluster],
    control_plane: ControlPlane,
) -> None:
    await client.create(application("web"))
    first = await wait_for(lambda: running_on(client, "web"), timeout=30, message="web placed")
    other = "fr" if first == "de" else "de"
    # A client of our own on the member cluster: Shoal forgets it once it is deleted.
    cluster = next(c for c in clusters if c.metadata.name == first)
    members = KubeClients(timeout=2.0)
    try:
        member = await members.get(cluster)
        assert await _deployment(member, "web") is not None
        await client.delete(Cluster, first, NS)
        await until_gone(client, Cluster, first, NS, timeout=60)
        assert await wait_for(lambda: running_on(client, "web"), timeout=30,
                              message="web moved") == other  # fmt: skip

        async def removed() -> bool:
            return await _deployment(member, "web") is None

        await wait_for(removed, timeout=30, message=f"web's Deployment removed from {first}")
    finally:
        await members.close()




@pytest.mark.usefixtures("clusters", "control_plane")
async def test_a_cluster_registered_again_is_pruned_of_what_shoal_left(
    client: ShoalClient, sim: SimServer, kube: dict[str, KubeCluster]
) -> None:
    """Objects labelled as an application's that is gone, or that no longer runs there, are
    removed when the cluster is registered again; the running application's stay."""
    from shoal.copies.owners import LABEL_NAME, LABEL_NAMESPACE, LABEL_UID

    await client.create(application("kept", labels=["location is DE"]))
    await wait_for(lambda: running_on(client, "kept"), timeout=30, message="kept on de")
    left = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "left-behind",
            "labels": {LABEL_NAMESPACE: NS, LABEL_NAME: "gone", LABEL_UID: "no-such-uid"}},
            "data": {}}  # fmt: skip
    de = kube["de"]
    await de.request("POST", f"/api/v1/namespaces/{NS}/configmaps", body=left)
    body = await client.get(Cluster, "de", NS)
    body.spec.kubeconfig = {**(body.spec.kubeconfig or {}), "preferences": {"colors": False}}
    await client.update(body)  # reached anew: as a cluster registered again is

    async def pruned() -> bool:
        return await de.read(left, NS) is None

    await wait_for(pruned, timeout=30, message="the object left behind removed")
    assert await _deployment(de, "kept") is not None
    assert await running_on(client, "kept") == "de"


async def test_every_online_cluster_is_pruned_now_and_then(
    client: ShoalClient,
    client_of: Callers,
    sim: SimServer,
    clusters: list[Cluster],
    kube: dict[str, KubeCluster],
) -> None:
    """Without any change of the cluster (a return the controller could not see while the
    API was away), what Shoal left there is still pruned, within ``prune_interval``."""
    from shoal.copies.owners import LABEL_NAME, LABEL_NAMESPACE, LABEL_UID
    from shoal.kube.controller import KubeController
    from shoal.model.kubernetes import ClusterState
    from shoal.observer.controller import ClusterObserver

    observer = ClusterObserver(client_of("cluster-observer"), interval=0.3, timeout=1.0)
    pruning = KubeController(
        client_of("kube-controller"), poll_interval=0.2, timeout=2.0, prune_interval=0.3
    )
    await observer.start()
    try:

        async def online() -> bool:
            found = await client.get(Cluster, "de", NS)
            return found.status.state is ClusterState.ONLINE

        await wait_for(online, timeout=30, message="de ONLINE")
        de = kube["de"]

        def left(name: str) -> dict[str, Any]:
            labels = {LABEL_NAMESPACE: NS, LABEL_NAME: "gone", LABEL_UID: "no-such-uid"}
            return {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "labels": labels}, "data": {}}  # fmt: skip

        async def pruned(name: str) -> bool:
            return await de.read(left(name), NS) is None

        await de.request("POST", f"/api/v1/namespaces/{NS}/configmaps", body=left("first"))
        await pruning.start()  # connecting to de prunes it once
        await wait_for(lambda: pruned("first"), timeout=30, message="the start's prune")
        await de.request("POST", f"/api/v1/namespaces/{NS}/configmaps", body=left("later"))
        await wait_for(lambda: pruned("later"), timeout=30, message="a prune without a change")
    finally:
        await pruning.stop()
        await observer.stop()
