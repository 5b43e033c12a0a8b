"""A cluster agent binds pods only for the fleet scheduler: a caller without its token gets
401 and nothing reaches the member cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from shoal.agent.callers import digests
from shoal.agent.config import AgentConfig
from shoal.agent.server import AgentServer, start_agent
from shoal.scheduler.pods.agents import Agents
from shoal.sim.server import SimServer
from tests.agent.conftest import CLUSTER, member_pods, pod, sim_options  # noqa: F401 (fixture)
from tests.util import wait_for

pytestmark = pytest.mark.integration
SCHEDULER_TOKEN = "the-fleet-schedulers-token"
DECISION = "/agent/scheduling-decision"


@pytest.fixture
async def agent(sim: SimServer) -> AsyncIterator[AgentServer]:
    server = await start_agent(sim.clusters.kubeconfig(CLUSTER), AgentConfig(cluster=CLUSTER),
                               callers=digests([SCHEDULER_TOKEN]))  # fmt: skip
    await wait_for(lambda: server.agent.sync.synced, message="agent synced")
    try:
        yield server
    finally:
        await server.stop()


async def test_an_agent_answers_only_the_scheduler(
    agent: AgentServer, sim: SimServer
) -> None:
    body = {"pod": pod(), "nodeName": "n-0"}
    async with httpx.AsyncClient(base_url=agent.url) as anyone:
        assert (await anyone.get("/healthz")).status_code == 200
        for headers in ({}, {"authorization": "Bearer guessed"}, {"authorization": "Basic x"}):
            for path, payload in ((DECISION, body), ("/samples/random", {"pod": pod()}),
                                  ("/agent/pods/delete", {"uids": ["x"]})):  # fmt: skip
                answer = await anyone.post(path, json=payload, headers=headers)
                assert answer.status_code == 401, (path, headers, answer.text)
            assert (await anyone.get("/agent/pods", headers=headers)).status_code == 401
    assert await member_pods(sim) == []
    scheduler = Agents(5.0, SCHEDULER_TOKEN)  # the fleet scheduler's client to agents
    try:
        async with scheduler.session.post(agent.url + DECISION, json=body) as answer:
            assert answer.status == 201, await answer.text()
    finally:
        await scheduler.close()
    [member] = await member_pods(sim)
    assert member["spec"]["nodeName"] == "n-0"
