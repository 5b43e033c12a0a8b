"""Fleet pods agree with the member clusters: a Scheduled pod whose member pod is gone from
its cluster (reset, or deleted there) is placed again, and the clusters hold each pod once."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import pytest

from shoal.client.rest import ShoalClient
from shoal.model.pods import Pod, PodPhase
from shoal.sim.server import SimServer
from shoal.testing.pods import NS, FleetAgents, pod
from tests.fleet.conftest import PipelineFactory, member_pods, settled
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_a_pod_lost_by_its_cluster_is_placed_again(
    client: ShoalClient, sim: SimServer, agents: FleetAgents, pipeline: PipelineFactory
) -> None:
    await pipeline(sweep_interval=0.3)
    names = [f"p-{i}" for i in range(6)]
    await asyncio.gather(*(client.create(pod(n, cpu="200m")) for n in names))
    placed = await settled(client, names)
    assert {p.status.phase for p in placed.values()} == {PodPhase.Scheduled}
    lost = next(iter(placed.values())).status.cluster
    gone = sorted(n for n, p in placed.items() if p.status.cluster == lost)
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as http:
        for name in gone:  # the member cluster loses them (reset, or deleted there)
            answer = await http.delete(f"/clusters/{lost}/api/v1/namespaces/{NS}/pods/{name}")
            assert answer.status_code in (200, 202), answer.text

    async def agreed() -> bool:
        pods = {p.metadata.name: p for p in (await client.list(Pod, NS)).items}
        if any(pods[n].status.phase is not PodPhase.Scheduled for n in names):
            return False
        members = [m for m in await member_pods(sim) if m["metadata"]["name"] in names]
        if Counter(m["metadata"]["name"] for m in members) != Counter(names):
            return False
        return all(
            (m["cluster"], m["spec"]["nodeName"])
            == (pods[m["metadata"]["name"]].status.cluster, pods[m["metadata"]["name"]].status.node)
            for m in members
        )

    await wait_for(agreed, timeout=30, interval=0.2, message="fleet pods and member pods agree")


async def test_a_cluster_registered_again_finds_its_agent_again(
    client: ShoalClient, sim: SimServer
) -> None:
    from shoal.agent.local import LocalAgents
    from shoal.model.kubernetes import Cluster
    from shoal.testing.pods import register_clusters

    await register_clusters(client, sim)
    agents = LocalAgents(client, keep=True, keep_every=0.1)
    name = next(iter(sim.clusters.clusters))
    try:
        server = await agents.start(name, sim.clusters.kubeconfig(name))
        await client.delete(Cluster, name, NS)
        await register_clusters(client, sim)  # the same name, a new cluster

        async def registered() -> bool:
            return (await client.get(Cluster, name, NS)).status.agent == server.url

        await wait_for(registered, timeout=10, message="the agent registered on the new cluster")
    finally:
        await agents.close()


async def test_a_registration_is_kept_after_the_api_was_away(
    client: ShoalClient, sim: SimServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A keeper whose check met a refused connection (the API restarting) goes on keeping:
    the cluster registered again afterwards still finds its agent."""
    from shoal.agent.register import keep_registered
    from shoal.model.kubernetes import Cluster
    from shoal.testing.pods import register_clusters
    from tests.util import free_port

    await register_clusters(client, sim)
    name = next(iter(sim.clusters.clusters))
    url = "http://127.0.0.1:1/agent"
    api = client.url
    client.url = f"http://127.0.0.1:{free_port()}"  # nothing listens: the API is away
    keeper = asyncio.create_task(keep_registered(client, name, NS, url, every=0.05))
    try:
        with caplog.at_level("WARNING", logger="shoal.agent.register"):
            await wait_for(lambda: "Connect" in caplog.text, timeout=10,
                           message="a check that found the API away")  # fmt: skip
        assert not keeper.done(), "the keeper stopped when the API was away"
        client.url = api
        await client.delete(Cluster, name, NS)
        await register_clusters(client, sim)

        async def registered() -> bool:
            return (await client.get(Cluster, name, NS)).status.agent == url

        await wait_for(registered, timeout=10, message="the agent registered on the new cluster")
    finally:
        client.url = api
        keeper.cancel()


async def test_a_second_copy_on_another_cluster_is_deleted(
    client: ShoalClient, sim: SimServer, agents: FleetAgents, pipeline: PipelineFactory
) -> None:
    """A member pod for a fleet pod Scheduled on another cluster (placed again while its first
    cluster was out of sight) is deleted by the sweep; the copy the status names stays."""
    from shoal.agent.pod import UID_ANNOTATION

    await pipeline(sweep_interval=0.3)
    await client.create(pod("twice", cpu="100m"))
    placed = (await settled(client, ["twice"]))["twice"]
    assert placed.status.phase is PodPhase.Scheduled
    here = placed.status.cluster
    other = next(c for c in sim.clusters.clusters if c != here)
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as http:
        nodes = (await http.get(f"/clusters/{other}/api/v1/nodes")).json()["items"]
        copy = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "twice", "namespace": NS,
                             "annotations": {UID_ANNOTATION: placed.metadata.uid}},
                "spec": {"nodeName": nodes[0]["metadata"]["name"],
                         "containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
        answer = await http.post(f"/clusters/{other}/api/v1/namespaces/{NS}/pods", json=copy)
        assert answer.status_code in (200, 201), answer.text

    async def one_copy() -> bool:
        where = [m["cluster"] for m in await member_pods(sim)
                 if m["metadata"]["name"] == "twice"]  # fmt: skip
        return where == [here]

    await wait_for(one_copy, timeout=20, interval=0.2, message="the second copy deleted")
    now = await client.get(Pod, "twice", NS)
    assert (now.status.phase, now.status.cluster) == (PodPhase.Scheduled, here)
