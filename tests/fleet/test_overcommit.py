"""Property: several decision pipelines and two scheduler processes never over-commit a node.

Two ``shoal scheduler`` processes (shards 0 and 1 of 2) and their parallel
pipelines place pods of random sizes onto the same agents, asking for more
than the fleet holds. Checked from the member clusters' own pod lists: every
node's requests fit its capacity, every pod ends Scheduled or Failed with a
reason, and a Scheduled pod is bound exactly once, where its status says.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.machinery.resources import amount
from shoal.model.pods import PodPhase
from shoal.sim.server import SimServer
from shoal.testing.launch import controller, stop
from shoal.testing.pods import FleetAgents, pod
from tests.fleet.conftest import member_pods, settled

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NODE_CPU, NODE_MEMORY, NODE_PODS = 2000, 4 * 2**30, 110


@pytest.mark.parametrize("seed", [1, 2])
async def test_two_schedulers_never_over_commit(api: ApiServer, client: ShoalClient,
                                                sim: SimServer, agents: FleetAgents,
                                                tmp_path: Path, seed: int) -> None:
    procs = []
    for shard in (0, 1):
        config = {"scheduler": {"fleet": {
            "shard": shard, "shards": 2, "clusters_percent": 100, "nodes_bp": 5000,
            "attempts": 4, "samplers": 4, "batch": 8, "candidates": 3,
            "backoff": {"initial": 0.05, "factor": 2, "cap": 0.3}}}}
        path = tmp_path / f"scheduler-{shard}.yaml"
        path.write_text(yaml.safe_dump(config))
        procs.append(controller("scheduler", api.url, "--config", str(path)))
    try:
        rng = random.Random(seed)
        # 3 clusters × 4 nodes × 2 cpu = 24 cpu; ask for about 30
        sizes = [rng.choice(["250m", "500m", "750m", "1"]) for _ in range(48)]
        names = [f"s{seed}-{i}" for i in range(len(sizes))]
        await asyncio.gather(*(client.create(pod(n, cpu=c)) for n, c in zip(names, sizes,
                                                                             strict=True)))
        pods = await settled(client, names, timeout=90)
    finally:
        for proc in procs:
            stop(proc)
    members = [m for m in await member_pods(sim) if m["metadata"]["name"] in names]
    used: dict[tuple[str, str], int] = defaultdict(int)
    for m in members:
        request = m["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        used[(m["cluster"], m["spec"]["nodeName"])] += amount("cpu", request)
    assert max(used.values()) <= NODE_CPU, used
    assert Counter(m["metadata"]["name"] for m in members) == Counter(
        n for n, p in pods.items() if p.status.phase is PodPhase.Scheduled)
    for m in members:
        placed = pods[m["metadata"]["name"]].status
        assert (m["cluster"], m["spec"]["nodeName"]) == (placed.cluster, placed.node)
    failed = [p for p in pods.values() if p.status.phase is PodPhase.Failed]
    assert all(p.status.reason for p in failed)
    assert sum(amount("cpu", s) for s in sizes) > 3 * 4 * NODE_CPU or not failed
