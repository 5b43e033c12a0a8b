"""A killed or hung agent costs at most its deadline; its cluster is used again when it returns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shoal.agent.register import set_agent_url
from shoal.client.rest import ShoalClient
from shoal.model.pods import Pod, PodPhase
from shoal.sim.server import SimServer
from shoal.testing.pods import NS, FleetAgents, pod
from tests.fleet.conftest import PipelineFactory, settled
from tests.util import wait_for

pytestmark = pytest.mark.integration
DEADLINE = 0.2


async def placed_away_from_edge_2(client: ShoalClient, prefix: str, count: int) -> list[Pod]:
    """Create ``count`` pods; all are placed, none on edge-2."""
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        await client.create(pod(name))
    pods = list((await settled(client, names)).values())
    assert {p.status.phase for p in pods} == {PodPhase.Scheduled}
    assert {p.status.cluster for p in pods} <= {"edge-0", "edge-1"}
    return pods


@pytest.fixture
async def hung() -> AsyncIterator[str]:
    """A server that accepts connections and never answers (a hung agent)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()


async def test_a_hung_agent_costs_one_deadline(client: ShoalClient, agents: FleetAgents,
                                               pipeline: PipelineFactory, hung: str) -> None:
    made = await pipeline(deadline=DEADLINE, samplers=1, batch=4)
    await set_agent_url(client, "edge-2", NS, hung)
    await wait_for(lambda: made.agents.by_cluster["edge-2"].url == hung)
    pods = await placed_away_from_edge_2(client, "h", 12)
    slow = [p for p in pods if p.status.timings.sampling > DEADLINE / 2]
    assert all(p.status.timings.sampling < DEADLINE + 0.3 for p in slow)
    # marked after two misses (batches of 4): the later batches do not wait for it
    assert len(slow) <= 8
    assert made.agents.by_cluster["edge-2"].marked is not None


async def test_a_killed_agent_is_skipped_then_used_again(
        client: ShoalClient, sim: SimServer, agents: FleetAgents,
        pipeline: PipelineFactory) -> None:
    made = await pipeline(deadline=DEADLINE)
    port = int(agents.servers["edge-2"].url.rsplit(":", 1)[1])
    await agents.stop("edge-2")  # killed: its URL stays registered, nothing listens
    await placed_away_from_edge_2(client, "k", 10)
    assert made.agents.by_cluster["edge-2"].marked is not None

    await agents.start_on(sim, "edge-2", port=port)  # back on the same URL
    await wait_for(lambda: made.agents.by_cluster["edge-2"].marked is None, timeout=10,
                   message="agent answers again")
    later = [f"b-{i}" for i in range(10)]
    for name in later:
        await client.create(pod(name, cpu="500m"))
    back = await settled(client, later)
    assert "edge-2" in {p.status.cluster for p in back.values()}
