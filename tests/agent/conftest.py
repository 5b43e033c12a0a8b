"""Fixtures: a real ``shoal sim`` cluster on the test's loop, a cluster agent on it, a client."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from shoal.agent.config import AgentConfig
from shoal.agent.server import AgentServer, start_agent
from shoal.sim.server import SimServer
from tests.util import wait_for

CLUSTER = "edge"
NODES = 4
Obj = dict[str, Any]

pytestmark = pytest.mark.integration

_uids = itertools.count()


def pod(name: str | None = None, cpu: str = "100m", memory: str = "128Mi",
        labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    """A pod as the scheduler sends it: a name, a uid, one container with requests."""
    n = next(_uids)
    container = {"name": "c", "image": "nginx:1",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {"metadata": {"name": name or f"p-{n}", "uid": f"uid-{n}", "labels": labels or {}},
            "spec": {"containers": [container], **spec}}


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """One cluster of small nodes, for the agent."""
    return dict(clusters=[CLUSTER], nodes=NODES, cpu="2", memory="4Gi", pod_start_delay=0.05)


AgentFactory = Callable[..., Any]


@pytest.fixture
async def start(sim: SimServer) -> AsyncIterator[AgentFactory]:
    """Starts agents on the sim cluster (stopped at the end): ``await start(**config)``."""
    started: list[AgentServer] = []

    async def make(**config: Any) -> AgentServer:
        server = await start_agent(sim.clusters.kubeconfig(CLUSTER),
                                   AgentConfig(cluster=CLUSTER, **config))
        started.append(server)
        await wait_for(lambda: server.agent.sync.synced, message="agent synced")
        return server

    yield make
    for server in started:
        await server.stop()


@pytest.fixture
async def agent(start: AgentFactory) -> AgentServer:
    server: AgentServer = await start()
    return server


@pytest.fixture
async def agent_http(agent: AgentServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=agent.url, timeout=10) as client:
        yield client


async def member_pods(
    sim: SimServer, cluster: str = CLUSTER, namespace: str = "default"
) -> list[Obj]:
    """The member cluster's own pod list (of ``namespace``), through its Kubernetes API."""
    url = f"{sim.url}/clusters/{cluster}/api/v1/namespaces/{namespace}/pods"
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(url)
    response.raise_for_status()
    items: list[Obj] = response.json()["items"]
    return items


async def patch_node(sim: SimServer, node: str, patch: Obj) -> None:
    """Change a node through the cluster's API (labels, taints), as an operator would."""
    url = f"{sim.url}/clusters/{CLUSTER}/api/v1/nodes/{node}"
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.patch(
            url, json=patch, headers={"Content-Type": "application/merge-patch+json"})
    response.raise_for_status()
