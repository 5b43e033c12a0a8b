"""Property: concurrent commits at the same nodes never over-commit a node.

Checked from the member cluster's own pod list, not from the agent's cache.
Each example gets a fresh sim cluster and agent, so examples are independent.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shoal.agent.config import AgentConfig
from shoal.agent.server import AgentServer, start_agent
from shoal.machinery.resources import amount
from shoal.sim.server import start_sim
from tests.agent.conftest import member_pods, pod
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLUSTER = "prop"
NODES = 3
CPU = 2000  # millicores per node
PODS = 4  # pods per node: the pod count is contended as well as cpu

commits = st.lists(
    st.tuples(st.integers(0, NODES - 1), st.sampled_from([0, 100, 300, 700, 1000, 1500])),
    min_size=2,
    max_size=24,
)


async def scenario(plan: list[tuple[int, int]]) -> None:
    sim = await start_sim(clusters=[], pod_start_delay=0.05)
    sim.clusters.add_cluster(CLUSTER, nodes=NODES, cpu="2", max_pods=PODS)
    agent: AgentServer | None = None
    try:
        agent = await start_agent(sim.clusters.kubeconfig(CLUSTER), AgentConfig(cluster=CLUSTER))
        sync = agent.agent.sync
        await wait_for(lambda: sync.synced, message="agent synced")
        async with httpx.AsyncClient(base_url=agent.url, timeout=20) as agent_http:
            answers = await asyncio.gather(*(
                agent_http.post("/agent/scheduling-decision",
                          json={"pod": pod(cpu=f"{cpu}m"), "nodeName": f"n-{node}"})
                for node, cpu in plan
            ))
        codes = [a.status_code for a in answers]
        assert set(codes) <= {201, 409}, [a.text for a in answers if a.status_code >= 500]
        members = await member_pods(sim, CLUSTER)
        assert len(members) == codes.count(201)
        cpu_used: dict[str, int] = {}
        pods_used: dict[str, int] = {}
        for member in members:
            node = member["spec"]["nodeName"]
            requests = member["spec"]["containers"][0]["resources"]["requests"]
            cpu_used[node] = cpu_used.get(node, 0) + amount("cpu", requests["cpu"])
            pods_used[node] = pods_used.get(node, 0) + 1
        assert all(value <= CPU for value in cpu_used.values()), cpu_used
        assert all(value <= PODS for value in pods_used.values()), pods_used
        # Every refusal was a real conflict: the node could not have taken that pod.
        for (node, cpu), answer in zip(plan, answers, strict=True):
            name = f"n-{node}"
            if answer.status_code == 409:
                full = pods_used.get(name, 0) >= PODS
                assert full or cpu_used.get(name, 0) + cpu > CPU, (name, cpu, cpu_used)
        assert agent.agent.cache.reservations == {}
    finally:
        if agent is not None:
            await agent.stop()
        await sim.stop()


# Bounded: each example starts real servers, so no shrinking (a failure shows its plan as is).
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(plan=commits)
def test_concurrent_commits_never_over_commit_a_node(plan: list[tuple[int, int]]) -> None:
    asyncio.run(scenario(plan))
