"""``shoal sim --mixed``: nodes of mixed sizes, taints and geo sites, as fleet pods see them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shoal.client.rest import ShoalClient
from shoal.model.pods import PodPhase, Toleration
from shoal.scheduler.pods.pipeline import FleetPipeline
from shoal.sim.nodes import MIXED, SITES
from shoal.sim.server import SimServer, start_sim
from shoal.testing.pods import pod, start_agents
from tests.fleet.conftest import fleet_config, member_pods, settled
from tests.util import wait_for

pytestmark = pytest.mark.integration
NODES = 20


@pytest.fixture
async def mixed(client: ShoalClient) -> AsyncIterator[SimServer]:
    sim = await start_sim(clusters=3, nodes=NODES, mixed=True, pod_start_delay=0.05)
    agents = await start_agents(client, sim)
    pipeline = FleetPipeline(client, fleet_config())
    task = asyncio.create_task(pipeline.run())
    await wait_for(lambda: len(pipeline.agents.by_cluster) == 3, message="agents known")
    try:
        yield sim
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await agents.close()
        await sim.stop()


async def test_sizes_taints_and_sites(client: ShoalClient, mixed: SimServer) -> None:
    big = max(int(cpu) for cpu, _ in MIXED)
    await client.create(pod("big", cpu=str(big - 1)))
    paris = SITES["paris"]
    await client.create(pod("near-paris", near=paris, max_km=50))
    on_node_0 = {"kubernetes.io/hostname": "n-0"}
    tolerate = [Toleration(key="dedicated", operator="Exists")]
    await client.create(pod("tolerant", tolerations=tolerate, nodeSelector=on_node_0))
    await client.create(pod("intolerant", nodeSelector=on_node_0))
    pods = await settled(client, ["big", "near-paris", "tolerant", "intolerant"])
    members = {m["metadata"]["name"]: m for m in await member_pods(mixed)}
    index = int(pods["big"].status.node.rsplit("-", 1)[1])
    assert MIXED[index % len(MIXED)][0] == str(big)
    assert pods["near-paris"].status.cluster == f"sim-{list(SITES).index('paris')}"
    assert pods["tolerant"].status.phase is PodPhase.Scheduled, pods["tolerant"].status.reason
    assert members["tolerant"]["spec"]["nodeName"] == "n-0"  # tainted: 0 % TAINT_EVERY == 0
    assert pods["intolerant"].status.phase is PodPhase.Failed
    assert "taint" in pods["intolerant"].status.reason
