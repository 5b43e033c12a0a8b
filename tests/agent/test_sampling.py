"""Sampling against a real sim cluster: eligibility, no duplicates, round-robin, geo, taints."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import httpx
import pytest

from shoal.agent.cache import NodeInfo
from shoal.agent.server import AgentServer
from shoal.sim.server import SimServer
from tests.agent.conftest import NODES, AgentFactory, patch_node, pod
from tests.util import wait_for

pytestmark = pytest.mark.integration
ALL = 10_000


def names(body: dict) -> list[str]:
    return [n["name"] for n in body["nodes"]]


async def sample(agent_http: httpx.AsyncClient, strategy: str, body: dict, bp: int = ALL) -> dict:
    response = await agent_http.post(f"/samples/{strategy}",
                                     json={"pod": body, "nodesToSampleBp": bp})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def settle(agent: AgentServer, node: str, check: Callable[[NodeInfo], object]) -> None:
    """Wait until the node change reached the agent's cache through its watch."""
    await wait_for(lambda: check(agent.agent.cache.nodes[node]), message=f"{node} in cache")


@pytest.mark.parametrize("strategy", ["random", "round-robin"])
async def test_only_eligible_nodes_and_none_twice(
    agent_http: httpx.AsyncClient, agent: AgentServer, sim: SimServer, strategy: str
) -> None:
    await patch_node(sim, "n-0", {"spec": {"taints": [{"key": "dedicated", "value": "gpu",
                                                       "effect": "NoSchedule"}]}})
    await settle(agent, "n-0", lambda n: n.taints)
    for _ in range(5):
        body = await sample(agent_http, strategy, pod())
        assert sorted(names(body)) == ["n-1", "n-2", "n-3"]
        assert body["wanted"] == NODES
        assert body["explanation"]["rejected"] == {"untolerated taint dedicated": 1}
        for node in body["nodes"]:
            assert node["total"]["cpu"] == 2000
            assert node["available"]["pods"] == 110
            assert 0 <= node["score"] <= 100


async def test_round_robin_covers_every_node_across_requests(agent_http: httpx.AsyncClient) -> None:
    one = ALL // NODES  # Np = 1 node of 4
    seen = [names(await sample(agent_http, "round-robin", pod(), one))[0] for _ in range(NODES)]
    assert sorted(seen) == [f"n-{i}" for i in range(NODES)]
    # Concurrent requests share the index too: 8 requests, every node exactly twice.
    bodies = await asyncio.gather(
        *(sample(agent_http, "round-robin", pod(), one) for _ in range(8))
    )
    drawn = sorted(names(b)[0] for b in bodies)
    assert drawn == sorted([f"n-{i}" for i in range(NODES)] * 2)


async def test_np_in_basis_points(agent_http: httpx.AsyncClient) -> None:
    assert len(names(await sample(agent_http, "random", pod(), 5000))) == 2
    assert len(names(await sample(agent_http, "random", pod(), 1))) == 1  # at least one
    default = await agent_http.post("/samples/random", json={"pod": pod()})
    assert len(default.json()["nodes"]) == math.ceil(NODES * 200 / ALL)


async def test_nothing_eligible_is_an_empty_list_with_reasons(
    agent_http: httpx.AsyncClient,
) -> None:
    body = await sample(agent_http, "random", pod(cpu="3"))
    assert body["nodes"] == []
    assert body["explanation"]["rejected"] == {"insufficient cpu": NODES}
    assert "0/4 examined nodes eligible: 4 insufficient cpu" in body["explanation"]["summary"]


async def test_taints_and_tolerations(
    agent_http: httpx.AsyncClient, agent: AgentServer, sim: SimServer
) -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    await patch_node(sim, "n-0", {"spec": {"taints": [taint]}})
    await patch_node(sim, "n-1", {"spec": {"taints": [{"key": "soft",
                                                       "effect": "PreferNoSchedule"}]}})
    await settle(agent, "n-0", lambda n: n.taints)
    await settle(agent, "n-1", lambda n: n.taints)
    plain = names(await sample(agent_http, "random", pod()))
    assert "n-0" not in plain and "n-1" in plain  # PreferNoSchedule does not filter
    for toleration in (
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists"},
        {"operator": "Exists"},
    ):
        assert "n-0" in names(await sample(agent_http, "random", pod(tolerations=[toleration])))
    wrong = {"key": "dedicated", "operator": "Equal", "value": "cpu"}
    assert "n-0" not in names(await sample(agent_http, "random", pod(tolerations=[wrong])))


async def test_node_selector_and_readiness(
    agent_http: httpx.AsyncClient, agent: AgentServer, sim: SimServer
) -> None:
    await patch_node(sim, "n-2", {"metadata": {"labels": {"disk": "ssd"}}})
    await settle(agent, "n-2", lambda n: "disk" in n.labels)
    assert names(await sample(agent_http, "random", pod(nodeSelector={"disk": "ssd"}))) == ["n-2"]
    sim.clusters.set_node_fault("edge", "n-3", not_ready=True)
    await settle(agent, "n-3", lambda n: not n.ready)
    body = await sample(agent_http, "random", pod())
    assert "n-3" not in names(body)
    assert body["explanation"]["rejected"] == {"node not ready": 1}


VIENNA = (48.2082, 16.3738)


async def test_geo_location_filter_and_score(start: AgentFactory, sim: SimServer) -> None:
    agent: AgentServer = await start(plugins={"scores": {"geo-location": 1}})
    lat, lon = VIENNA
    places = {"n-0": f"{lat}_{lon}", "n-1": f"{lat + 0.045}_{lon}",  # 5.004 km north
              "n-2": f"{lat + 0.45}_{lon}"}  # 50 km north; n-3 has no location
    for node, where in places.items():
        await patch_node(sim, node, {"metadata": {"labels": {"shoal.dev/lat-long": where}}})
        await settle(agent, node, lambda n: "shoal.dev/lat-long" in n.labels)
    target = {"shoal.dev/target-lat-long": f"{lat}_{lon}"}
    async with httpx.AsyncClient(base_url=agent.url) as agent_http:
        body = await sample(agent_http, "random", pod(labels=target))
        scores = {n["name"]: n["score"] for n in body["nodes"]}
        distance = 6371.0 * math.radians(0.045)
        assert scores == {"n-0": 100, "n-1": math.ceil(100 - 99 * distance / 10)}
        assert scores["n-1"] == 51
        assert body["explanation"]["rejected"] == {"farther than 10 km": 1,
                                                   "no node location": 1}
        wide = await sample(agent_http, "random", pod(labels={**target,
                                                        "shoal.dev/max-distance-km": "100"}))
        wide_scores = {n["name"]: n["score"] for n in wide["nodes"]}
        assert wide_scores["n-2"] == math.ceil(100 - 99 * distance * 10 / 100)
        # Without a target the plugin stays out of the way.
        assert len((await sample(agent_http, "random", pod()))["nodes"]) == NODES


async def test_batch_serves_many_pods_in_one_round_trip(agent_http: httpx.AsyncClient) -> None:
    items = [{"pod": pod(), "nodesToSampleBp": ALL // NODES} for _ in range(NODES)]
    response = await agent_http.post("/samples/round-robin/batch", json={"items": items})
    assert response.status_code == 200, response.text
    drawn = sorted(names(item)[0] for item in response.json()["items"])
    assert drawn == [f"n-{i}" for i in range(NODES)]


async def test_least_and_most_allocated(start: AgentFactory) -> None:
    spread: AgentServer = await start(plugins={"scores": {"least-allocated": 1}})
    pack: AgentServer = await start(plugins={"scores": {"most-allocated": 1}})
    async with httpx.AsyncClient(base_url=spread.url) as agent_http:
        done = await agent_http.post("/agent/scheduling-decision",
                               json={"pod": pod(cpu="1", memory="2Gi"), "nodeName": "n-0"})
        assert done.status_code == 201, done.text
    await wait_for(lambda: pack.agent.cache.requested.get("n-0"), message="pod seen")
    for server, best in ((spread, False), (pack, True)):
        async with httpx.AsyncClient(base_url=server.url) as agent_http:
            body = await sample(agent_http, "random", pod(cpu="500m", memory="1Gi"))
        scores = {n["name"]: n["score"] for n in body["nodes"]}
        # n-0 is half full: with the pod 75 % used; the others 25 %.
        assert scores["n-0"] == (75 if best else 25)
        assert scores["n-1"] == (25 if best else 75)
