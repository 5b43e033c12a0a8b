"""Clusters built on clouds, end to end: bound, built, grown, used, deleted; and faults.

Everything is read where it happens: the simulator's own list of clusters, the
built cluster's own Kubernetes API (its nodes, the application's Deployment).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from shoal.client.rest import NotFound, ShoalClient
from shoal.infrastructure.controller import FINALIZER, key
from shoal.model.base import Metadata
from shoal.model.events import Event
from shoal.model.kubernetes import Application, Cluster, ClusterSpec, ClusterState
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.infrastructure.conftest import NS, cluster_on_cloud, sim_clusters, template

pytestmark = pytest.mark.usefixtures("control_plane")


async def state_of(client: ShoalClient, name: str) -> Cluster:
    return await client.get(Cluster, name, NS)


async def nodes_of(cluster: Cluster) -> list[str]:
    """The node names the built cluster's own API lists (with its kubeconfig)."""
    config: Any = cluster.spec.kubeconfig
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"]["token"]
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.get(f"{server}/api/v1/nodes") as answer:
            assert answer.status == 200
            body = await answer.json()
    return sorted(item["metadata"]["name"] for item in body["items"])


async def deployment_ready(cluster: Cluster, name: str) -> int:
    config: Any = cluster.spec.kubeconfig
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"]["token"]
    path = f"{server}/apis/apps/v1/namespaces/{NS}/deployments/{name}"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.get(path) as answer:
            if answer.status == 404:
                return -1
            body = await answer.json()
    return int((body.get("status") or {}).get("readyReplicas") or 0)


async def has_events(client: ShoalClient, name: str, *wanted: str) -> None:
    """Until the events of cluster ``name`` include every reason ``wanted`` (written in batches)."""

    async def found() -> bool:
        events = (await client.list(Event, NS)).items
        return set(wanted) <= {e.reason for e in events if e.involved_object.name == name}

    await wait_for(found, timeout=10, interval=0.1, message=f"events {wanted} of {name}")


async def test_a_cluster_is_built_grown_used_and_deleted(
    client: ShoalClient, sim: SimServer
) -> None:
    created = await client.create(cluster_on_cloud("edge-1", "DE", site="edge"))
    assert created.status.state is ClusterState.PENDING
    infrastructure = key(created)

    async def online() -> Cluster | None:
        cluster = await state_of(client, "edge-1")
        return cluster if cluster.status.state is ClusterState.ONLINE else None

    cluster = await wait_for(online, timeout=20, interval=0.1, message="edge-1 ONLINE")
    assert cluster.status.scheduled_to is not None
    assert cluster.status.scheduled_to.name == "cloud-de"
    assert cluster.status.running_on == cluster.status.scheduled_to
    assert cluster.status.cluster_id == infrastructure
    assert FINALIZER in cluster.metadata.finalizers
    assert await sim_clusters(sim) == {infrastructure: 2}
    assert await nodes_of(cluster) == ["n-0", "n-1"]
    await has_events(client, "edge-1", "BoundToCloud", "Creating", "Created")

    # an application constrained to the new cluster runs there
    app = Application.model_validate({
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"manifest": [builders.deployment("web", "nginx:1", replicas=2)],
                 "constraints": {"cluster": {"labels": ["site is edge"]}}},
    })  # fmt: skip
    await client.create(app)
    await wait_for(lambda: ready_two(cluster), timeout=20, interval=0.1,
                   message="web ready on edge-1")  # fmt: skip

    # two more workers in the template: the same cluster grows in place
    cluster.spec.tosca = template(workers=4)
    await client.update(cluster)

    async def grown() -> list[str] | None:
        current = await state_of(client, "edge-1")
        if current.status.state is not ClusterState.ONLINE:
            return None
        names = await nodes_of(current)
        return names if len(names) == 4 else None

    assert await wait_for(grown, timeout=20, interval=0.1, message="four nodes") == [
        "n-0", "n-1", "n-2", "n-3"
    ]  # fmt: skip
    current = await state_of(client, "edge-1")
    assert current.status.last_applied_tosca == template(workers=4)
    assert current.status.cluster_id == infrastructure
    assert await sim_clusters(sim) == {infrastructure: 4}
    await has_events(client, "edge-1", "Reconciling", "Reconciled")
    # every step so far is a Normal event, and the grow did not say Created again
    events = [e for e in (await client.list(Event, NS)).items
              if e.involved_object.name == "edge-1"]  # fmt: skip
    assert [e.reason for e in events if e.type == "Warning"] == []
    created = [e for e in events if e.reason == "Created"]
    assert len(created) == 1 and created[0].count == 1
    assert {"Creating", "Connecting", "Online", "Reconciling"} <= {e.reason for e in events}

    # and back to three: the newest node goes, the application's pods run on the others
    current.spec.tosca = template(workers=3)
    await client.update(current)

    async def shrunk() -> list[str] | None:
        latest = await state_of(client, "edge-1")
        if latest.status.state is not ClusterState.ONLINE or not _is_applied(latest):
            return None
        names = await nodes_of(latest)
        return names if len(names) == 3 else None

    assert await wait_for(shrunk, timeout=20, interval=0.1, message="three nodes") == [
        "n-0", "n-1", "n-2"
    ]  # fmt: skip
    await wait_for(lambda: ready_two(cluster), timeout=20, interval=0.1,
                   message="web ready again on edge-1")  # fmt: skip

    # a spare cluster to move to; deleting edge-1 moves the application, then removes it
    sim.clusters.add_cluster("spare", 2)
    await client.create(Cluster(
        metadata=Metadata(name="spare", namespace=NS, labels={"site": "edge"}),
        spec=ClusterSpec(kubeconfig=sim.kubeconfig("spare")),
    ))  # fmt: skip
    spare = await wait_for(
        lambda: _online(client, "spare"), timeout=20, interval=0.1, message="spare ONLINE"
    )
    await client.delete(Cluster, "edge-1", NS)

    async def gone() -> bool:
        try:
            await state_of(client, "edge-1")
        except NotFound:
            return True
        return False

    await wait_for(gone, timeout=30, interval=0.1, message="edge-1 removed")
    assert await sim_clusters(sim) == {"spare": 2}
    await wait_for(lambda: ready_two(spare), timeout=20, interval=0.1, message="web on spare")
    moved = await client.get(Application, "web", NS)
    assert moved.status.running_on is not None and moved.status.running_on.name == "spare"


def _is_applied(cluster: Cluster) -> bool:
    return cluster.status.last_applied_tosca == cluster.spec.tosca


async def _online(client: ShoalClient, name: str) -> Cluster | None:
    cluster = await state_of(client, name)
    return cluster if cluster.status.state is ClusterState.ONLINE else None


async def test_a_template_the_provider_refuses_fails_with_the_reason(
    client: ShoalClient, sim: SimServer
) -> None:
    network_only = {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        "topology_template": {
            "node_templates": {"net": {"type": "tosca.nodes.network.Network"}},
            "outputs": {"kubeconfig": {"value": "set by the provider"}},
        },
    }
    await client.create(cluster_on_cloud("no-nodes", "FR", tosca=network_only))

    async def failed() -> Cluster | None:
        cluster = await state_of(client, "no-nodes")
        return cluster if cluster.status.state is ClusterState.FAILED else None

    cluster = await wait_for(failed, timeout=20, interval=0.1, message="no-nodes FAILED")
    assert cluster.status.reason is not None
    assert cluster.status.reason.code.name == "INVALID_TOSCA_MANIFEST"
    assert "compute node template" in cluster.status.reason.message
    assert await sim_clusters(sim) == {}
    # fixed by the user: built at once
    cluster.spec.tosca = template(workers=1)
    await client.update(cluster)
    built = await wait_for(lambda: _online(client, "no-nodes"), timeout=20, interval=0.1,
                           message="no-nodes ONLINE once fixed")  # fmt: skip
    assert await sim_clusters(sim) == {key(built): 1}


async def test_a_provider_that_hangs_times_out_then_is_tried_again(
    client: ShoalClient, sim: SimServer
) -> None:
    sim.clusters.admin_delay = 3.0  # the controller waits 1 s for an answer
    created = await client.create(cluster_on_cloud("slow", "DE"))

    async def timed_out() -> Cluster | None:
        cluster = await state_of(client, "slow")
        reason = cluster.status.reason
        failed = cluster.status.state is ClusterState.FAILED and reason is not None
        return cluster if failed and "no answer in time" in reason.message else None

    await wait_for(timed_out, timeout=20, interval=0.1, message="slow FAILED by a timeout")
    sim.clusters.admin_delay = 0.0
    built = await wait_for(lambda: _online(client, "slow"), timeout=20, interval=0.1,
                           message="slow ONLINE once the provider answers")  # fmt: skip
    # the create that timed out was made all the same: the retry found it, none doubled
    assert await sim_clusters(sim) == {key(created): 2}
    assert built.status.cluster_id == key(created)
    await has_events(client, "slow", "InfrastructureFailed")


async def ready_two(cluster: Cluster) -> bool:
    return await deployment_ready(cluster, "web") == 2
