"""The fleet pipeline against real agents on sim clusters: placed, failed with a reason, once."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Cluster
from shoal.model.pods import PodPhase
from shoal.sim.server import SimServer
from shoal.testing.pods import FleetAgents, pod
from tests.fleet.conftest import PipelineFactory, member_pods, settled
from tests.util import wait_for

pytestmark = pytest.mark.integration


async def test_pods_are_placed_once_each(client: ShoalClient, sim: SimServer,
                                         agents: FleetAgents, pipeline: PipelineFactory) -> None:
    await pipeline()
    names = [f"p-{i}" for i in range(30)]
    await asyncio.gather(*(client.create(pod(n, cpu="200m")) for n in names))
    pods = await settled(client, names)
    assert {p.status.phase for p in pods.values()} == {PodPhase.Scheduled}
    for p in pods.values():
        assert p.status.cluster and p.status.node and p.status.attempts >= 1
        assert p.status.explanation["sampling"]["answered"] == 3
        assert p.status.timings.commit > 0
    members = [m for m in await member_pods(sim) if m["metadata"]["name"] in names]
    counts = Counter(m["metadata"]["name"] for m in members)
    assert counts == Counter(names)  # bound exactly once, in the cluster its status names
    for m in members:
        assert (m["cluster"], m["spec"]["nodeName"]) == (
            pods[m["metadata"]["name"]].status.cluster, pods[m["metadata"]["name"]].status.node)


async def test_a_pod_that_fits_nowhere_fails_with_a_reason(
        client: ShoalClient, agents: FleetAgents, pipeline: PipelineFactory) -> None:
    await pipeline(attempts=3)
    await client.create(pod("huge", cpu="64"))
    found = (await settled(client, ["huge"]))["huge"]
    assert found.status.phase is PodPhase.Failed
    assert found.status.attempts == 3
    assert "not placed after 3 attempts" in found.status.reason
    assert "insufficient cpu" in found.status.reason


async def test_a_pod_no_cluster_may_take_fails_with_a_reason(
        client: ShoalClient, agents: FleetAgents, pipeline: PipelineFactory) -> None:
    await pipeline(attempts=3)
    await client.create(pod("mars", clusters=["location is Mars"]))
    found = (await settled(client, ["mars"]))["mars"]
    assert found.status.phase is PodPhase.Failed and found.status.attempts == 3
    assert "no cluster with an agent (3) matches the pod's cluster constraints" in (
        found.status.reason)


async def test_cluster_label_constraints_choose_the_clusters(
        client: ShoalClient, agents: FleetAgents, pipeline: PipelineFactory) -> None:
    stored = await client.get(Cluster, "edge-1", "default")
    stored.metadata.labels = {"location": "DE"}
    await client.update(stored)
    made = await pipeline()
    await wait_for(lambda: made.agents.by_cluster["edge-1"].labels.get("location") == "DE")
    names = [f"de-{i}" for i in range(5)]
    for n in names:
        await client.create(pod(n, clusters=["location is DE"]))
    pods = await settled(client, names)
    assert {p.status.cluster for p in pods.values()} == {"edge-1"}
