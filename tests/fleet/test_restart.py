"""A scheduler killed between an agent's commit and the pod's status write places nothing twice.

The agents hold every node's lock, so the first scheduler's commits wait in
the agents; that scheduler is stopped (SIGSTOP), the locks are released, the
agents create the member pods and answer a process that never reads the
answer, and it is killed (SIGKILL) before any status is written. The second
scheduler finds the pods still ``Pending``: it must adopt them where they
are, not place them a second time.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import yaml

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.pods import Pod, PodPhase
from shoal.sim.server import SimServer
from shoal.testing.launch import controller, kill, stop
from shoal.testing.pods import NS, FleetAgents, pod, start_agents
from tests.fleet.conftest import member_pods, settled
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PODS = 9


@pytest.fixture
async def patient_agents(client: ShoalClient, sim: SimServer) -> AsyncIterator[FleetAgents]:
    """Agents whose commits wait up to 30 s for a node's lock."""
    started = await start_agents(client, sim, lock_timeout=30)
    try:
        yield started
    finally:
        await started.close()


def waiting_commits(agents: FleetAgents) -> int:
    """Commits queued behind the locks the test holds (each lock: the test plus its waiters)."""
    return sum(users - 1 for server in agents.servers.values()
               for _, users in server.agent.committer.locks._locks.values())


async def test_scheduler_killed_between_commit_and_status_write(
        api: ApiServer, client: ShoalClient, sim: SimServer, patient_agents: FleetAgents,
        tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump({"scheduler": {"fleet": {
        "clusters_percent": 100, "nodes_bp": 10_000, "commit_timeout": 30, "batch": 16,
        "backoff": {"initial": 0.05, "factor": 2, "cap": 0.3}}}}))
    names = [f"k-{i}" for i in range(PODS)]
    first = controller("scheduler", api.url, "--config", str(config))
    second = None
    try:
        async with AsyncExitStack() as held:
            for server in patient_agents.servers.values():
                for node in list(server.agent.cache.nodes):
                    await held.enter_async_context(server.agent.committer.locks.hold(node, 1))
            await asyncio.gather(*(client.create(pod(n)) for n in names))
            await wait_for(lambda: waiting_commits(patient_agents) == PODS, timeout=30,
                           message="every commit waiting in an agent")
            first.send_signal(signal.SIGSTOP)  # the answers will never be read
        await wait_for(lambda: _members(sim, names, PODS), timeout=20, message="member pods")
        kill(first)
        listed = await client.list(Pod, NS)
        assert {p.status.phase for p in listed.items} == {PodPhase.Pending}  # no status written

        second = controller("scheduler", api.url, "--config", str(config))
        pods = await settled(client, names, timeout=30)
    finally:
        kill(first)
        if second is not None:
            stop(second)
    assert {p.status.phase for p in pods.values()} == {PodPhase.Scheduled}
    members = [m for m in await member_pods(sim) if m["metadata"]["name"] in names]
    assert Counter(m["metadata"]["name"] for m in members) == Counter(names)  # once each
    for m in members:
        status = pods[m["metadata"]["name"]].status
        assert (m["cluster"], m["spec"]["nodeName"]) == (status.cluster, status.node)


async def _members(sim: SimServer, names: list[str], count: int) -> bool:
    return len([m for m in await member_pods(sim) if m["metadata"]["name"] in names]) == count
