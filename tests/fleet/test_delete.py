"""Deleting a fleet pod deletes its member pod, and the node's resources come back."""

from __future__ import annotations

from contextlib import AsyncExitStack

import httpx
import pytest

from shoal.client.rest import ShoalClient
from shoal.model.pods import Pod, PodPhase
from shoal.sim.server import SimServer
from shoal.testing.pods import NS, FleetAgents, pod
from tests.fleet.conftest import PipelineFactory, member_pods, settled
from tests.util import wait_for

pytestmark = pytest.mark.integration


async def _gone(sim: SimServer, name: str) -> bool:
    return all(m["metadata"]["name"] != name for m in await member_pods(sim))


async def test_deleted_pod_leaves_its_cluster(client: ShoalClient, sim: SimServer,
                                              agents: FleetAgents,
                                              pipeline: PipelineFactory) -> None:
    await pipeline()
    await client.create(pod("d-1", cpu="1500m"))
    placed = (await settled(client, ["d-1"]))["d-1"]
    assert placed.status.phase is PodPhase.Scheduled
    cache = agents.servers[str(placed.status.cluster)].agent.cache
    assert cache.requested[str(placed.status.node)]["cpu"] == 1500
    await client.delete(Pod, "d-1", NS)
    await wait_for(lambda: _gone(sim, "d-1"), message="member pod deleted")
    await wait_for(lambda: cache.requested[str(placed.status.node)].get("cpu", 0) == 0,
                   message="node's cpu free again")


async def test_pod_deleted_while_its_commit_waits(client: ShoalClient, sim: SimServer,
                                                  agents: FleetAgents,
                                                  pipeline: PipelineFactory) -> None:
    await pipeline()
    async with AsyncExitStack() as held:  # commits wait for the nodes' locks (up to 2 s)
        for server in agents.servers.values():
            for node in list(server.agent.cache.nodes):
                await held.enter_async_context(server.agent.committer.locks.hold(node, 1))
        await client.create(pod("d-2"))
        await wait_for(lambda: any(users > 1 for s in agents.servers.values()
                                   for _, users in s.agent.committer.locks._locks.values()),
                       message="commit waiting")
        await client.delete(Pod, "d-2", NS)
    await wait_for(lambda: _gone(sim, "d-2"), message="member pod deleted")
    assert all(not s.agent.cache.reservations for s in agents.servers.values())


async def test_member_pod_of_a_pod_deleted_meanwhile_is_swept(
        client: ShoalClient, sim: SimServer, agents: FleetAgents,
        pipeline: PipelineFactory) -> None:
    """A fleet pod deleted while no scheduler ran: its member pod goes when one starts."""
    body = {"metadata": {"name": "orphan", "namespace": NS, "uid": "gone-uid"},
            "spec": pod("orphan").spec.kubernetes()}
    async with httpx.AsyncClient(base_url=agents.servers["edge-0"].url) as http:
        made = await http.post("/agent/scheduling-decision", json={"pod": body, "nodeName": "n-0"})
        assert made.status_code == 201, made.text
        listed = (await http.get("/agent/pods")).json()["pods"]
        assert listed["gone-uid"]["name"] == "orphan"
    assert not await _gone(sim, "orphan")
    await pipeline()
    await wait_for(lambda: _gone(sim, "orphan"), message="orphan deleted by the sweep")
