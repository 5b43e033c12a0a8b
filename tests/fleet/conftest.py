"""Fixtures: the API, a small sim fleet with a registered agent per cluster, the fleet pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from shoal.client.rest import ShoalClient
from shoal.model.pods import Pod, PodPhase
from shoal.model.scheduler_config import Backoff, FleetConfig
from shoal.scheduler.pods.pipeline import FleetPipeline
from shoal.sim.server import SimServer
from shoal.testing.pods import NS, FleetAgents, start_agents
from tests.util import wait_for

CLUSTERS = ["edge-0", "edge-1", "edge-2"]
Obj = dict[str, Any]

pytestmark = pytest.mark.integration


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """Small nodes, which fleet pods fill."""
    return dict(clusters=CLUSTERS, nodes=4, cpu="2", memory="4Gi", pod_start_delay=0.05)


@pytest.fixture
async def agents(client: ShoalClient, sim: SimServer) -> AsyncIterator[FleetAgents]:
    started = await start_agents(client, sim)
    try:
        yield started
    finally:
        await started.close()


def fleet_config(**changes: Any) -> FleetConfig:
    """Quick retries for tests; Cp 100 % so that a small fleet is sampled whole."""
    base: Obj = {"clusters_percent": 100, "nodes_bp": 10_000, "attempts": 4,
                 "backoff": Backoff(initial=0.02, factor=2, cap=0.2), "batch": 16}
    return FleetConfig(**{**base, **changes})


PipelineFactory = Callable[..., Any]


@pytest.fixture
async def pipeline(client: ShoalClient, agents: FleetAgents) -> AsyncIterator[PipelineFactory]:
    """``await pipeline(**config)``: a fleet pipeline running on the test's loop."""
    import asyncio

    running: list[tuple[FleetPipeline, asyncio.Task[None]]] = []

    async def make(**config: Any) -> FleetPipeline:
        made = FleetPipeline(client, fleet_config(**config))
        running.append((made, asyncio.create_task(made.run())))
        await wait_for(lambda: len(made.agents.by_cluster) == len(agents.servers),
                       message="agents known")
        return made

    yield make
    for _, task in running:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass


async def settled(client: ShoalClient, names: list[str], timeout: float = 30) -> dict[str, Pod]:
    """Every named pod once it is Scheduled or Failed."""

    async def done() -> dict[str, Pod] | None:
        listed = await client.list(Pod, NS)
        pods = {p.metadata.name: p for p in listed.items if p.metadata.name in names}
        finished = all(p.status.phase is not PodPhase.Pending for p in pods.values())
        return pods if len(pods) == len(names) and finished else None

    result: dict[str, Pod] = await wait_for(done, timeout=timeout, interval=0.1,
                                            message="pods settled")
    return result


async def member_pods(sim: SimServer) -> list[Obj]:
    """Every pod of every member cluster, from the clusters' own pod lists."""
    found: list[Obj] = []
    async with httpx.AsyncClient(timeout=10) as http:
        for name in sim.clusters.clusters:
            resp = await http.get(f"{sim.url}/clusters/{name}/api/v1/pods")
            resp.raise_for_status()
            for item in resp.json()["items"]:
                item["cluster"] = name
                found.append(item)
    return found
