"""Commits against a real sim cluster: conflicts, idempotence, failures, restarts, bad bodies."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from shoal.agent.server import AgentServer
from shoal.machinery.names import kube_name
from shoal.sim.server import SimServer
from tests.agent.conftest import CLUSTER, AgentFactory, member_pods, pod
from tests.util import wait_for

pytestmark = pytest.mark.integration
DECISION = "/agent/scheduling-decision"


async def commit(agent_http: httpx.AsyncClient, body: dict[str, Any], node: str) -> httpx.Response:
    return await agent_http.post(DECISION, json={"pod": body, "nodeName": node})


async def test_commit_creates_the_pod_bound_to_the_node(
    agent_http: httpx.AsyncClient, agent: AgentServer, sim: SimServer
) -> None:
    body = pod(cpu="500m")
    response = await commit(agent_http, body, "n-1")
    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer["nodeName"] == "n-1" and answer["created"] is True
    assert set(answer["timings"]) == {"lockMs", "createMs", "totalMs"}
    [member] = await member_pods(sim)
    assert member["spec"]["nodeName"] == "n-1"
    assert member["metadata"]["annotations"]["shoal.dev/pod-uid"] == body["metadata"]["uid"]
    sample = (await agent_http.post("/samples/round-robin",
                              json={"pod": pod(), "nodesToSampleBp": 10_000})).json()
    n1 = next(n for n in sample["nodes"] if n["name"] == "n-1")
    assert n1["available"]["cpu"] == 1500
    health = (await agent_http.get("/healthz")).json()
    assert health["timings"]["commit"]["count"] == 1 and health["reservations"] == 0


async def test_conflict_is_a_409_problem_naming_node_and_resource(
    agent_http: httpx.AsyncClient,
) -> None:
    assert (await commit(agent_http, pod(cpu="1500m"), "n-0")).status_code == 201
    response = await commit(agent_http, pod(cpu="1"), "n-0")
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 409 and problem["title"] == "SCHEDULING_CONFLICT"
    assert "n-0" in problem["detail"] and "cpu" in problem["detail"]
    assert problem["errors"] == [{"field": "nodeName", "reason": "insufficient cpu"}]
    missing = await commit(agent_http, pod(), "n-9")
    assert missing.status_code == 404 and "n-9" in missing.json()["detail"]


async def test_repeated_commit_makes_one_pod(agent_http: httpx.AsyncClient, sim: SimServer) -> None:
    body = pod()
    first, second = await commit(agent_http, body, "n-2"), await commit(agent_http, body, "n-2")
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["created"] is False
    again = pod()
    answers = await asyncio.gather(*(commit(agent_http, again, "n-3") for _ in range(5)))
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 200, 201]
    elsewhere = await commit(agent_http, body, "n-0")
    assert elsewhere.status_code == 409 and "n-2" in elsewhere.json()["detail"]
    names = [p["metadata"]["name"] for p in await member_pods(sim)]
    assert sorted(names) == sorted([body["metadata"]["name"], again["metadata"]["name"]])


async def restarted_after_commit(start: AgentFactory, body: dict[str, Any]) -> AgentServer:
    """A first agent commits ``body`` to node n-0; a second, fresh one, whose list has not
    caught the pod yet."""
    first: AgentServer = await start()
    async with httpx.AsyncClient(base_url=first.url) as agent_http:
        assert (await commit(agent_http, body, "n-0")).status_code == 201
    second: AgentServer = await start()
    second.agent.cache.uids.clear()  # as if its list had not caught the pod yet
    return second


async def test_repeat_after_restart_finds_the_pod_in_the_cluster(
    start: AgentFactory, sim: SimServer
) -> None:
    """A second agent (fresh cache, maybe before its watch saw the pod) makes no second pod."""
    body = pod()
    second = await restarted_after_commit(start, body)
    async with httpx.AsyncClient(base_url=second.url) as agent_http:
        assert (await commit(agent_http, body, "n-0")).status_code == 200
        clash = pod(name=body["metadata"]["name"])  # same name, another uid
        taken = await commit(agent_http, clash, "n-0")
        assert taken.status_code == 409 and "another uid" in taken.json()["detail"]
    assert len(await member_pods(sim)) == 1


async def test_failed_create_releases_the_reservation(
    agent_http: httpx.AsyncClient, agent: AgentServer, sim: SimServer
) -> None:
    sim.clusters.set_unreachable(CLUSTER, True)
    await wait_for(lambda: not agent.agent.sync.synced, message="watch cut")
    refused = await commit(agent_http, pod(), "n-0")
    assert refused.status_code == 503  # not watching: no commit on a stale cache
    sync = agent.agent.sync
    await sync.stop()  # then pretend it watches, to reach the create
    sync.live.update(f.kind for f in sync.feeds)
    failed = await commit(agent_http, pod(cpu="2"), "n-0")
    assert failed.status_code == 503, failed.text
    assert failed.json()["title"] == "CLUSTER_UNAVAILABLE"
    cache = agent.agent.cache
    assert cache.reservations == {} and cache.requested.get("n-0", {}) == {}
    assert len(agent.agent.committer.locks) == 0
    sim.clusters.set_unreachable(CLUSTER, False)
    sync.live.clear()
    await sync.start()
    await wait_for(lambda: sync.synced, message="watch back")
    assert (await commit(agent_http, pod(cpu="2"), "n-0")).status_code == 201


async def test_restart_between_reserve_and_create_leaves_no_phantom(
    start: AgentFactory, sim: SimServer
) -> None:
    first: AgentServer = await start()
    reached = asyncio.Event()

    async def hang(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        await asyncio.Event().wait()

    first.agent.committer._post = hang  # type: ignore[method-assign]
    async with httpx.AsyncClient(base_url=first.url, timeout=10) as agent_http:
        pending = asyncio.create_task(commit(agent_http, pod(cpu="2"), "n-0"))
        await asyncio.wait_for(reached.wait(), 5)
        assert first.agent.cache.requested["n-0"]["cpu"] == 2000  # reserved, not created
        await first.stop()  # the agent goes away mid-commit
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)
    second: AgentServer = await start()
    assert second.agent.cache.reservations == {}
    assert second.agent.cache.requested.get("n-0", {}) == {}
    assert await member_pods(sim) == []
    async with httpx.AsyncClient(base_url=second.url) as agent_http:
        assert (await commit(agent_http, pod(cpu="2"), "n-0")).status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pod": {"metadata": {"name": "a", "uid": "u"}, "spec": {}}, "nodeName": "n-0"},
         "pod.spec.containers"),
        ({"pod": pod()}, "nodeName"),
        ({"pod": pod(cpu="lots"), "nodeName": "n-0"},
         "pod.spec.containers[0].resources.requests.cpu"),
        ({"pod": {**pod(), "metadata": {"name": "x"}}, "nodeName": "n-0"},
         "pod.metadata.uid"),
        ({"pod": pod(labels={"shoal.dev/target-lat-long": "north"}), "nodeName": "n-0"},
         "pod.metadata.labels.shoal.dev/target-lat-long"),
        ({"pod": pod(tolerations=[{"operator": "Maybe"}]), "nodeName": "n-0"},
         "pod.spec.tolerations[0].operator"),
    ],
)
async def test_bad_body_is_a_422_naming_the_field(
    agent_http: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await agent_http.post(DECISION, json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert field in [e["field"] for e in response.json()["errors"]]


async def test_sample_errors_are_problems(agent_http: httpx.AsyncClient) -> None:
    bad_bp = await agent_http.post("/samples/random", json={"pod": pod(), "nodesToSampleBp": 0})
    assert bad_bp.status_code == 422
    assert bad_bp.json()["errors"][0]["field"] == "nodesToSampleBp"
    in_batch = await agent_http.post("/samples/random/batch",
                               json={"items": [{"pod": pod()}, {"pod": {"spec": {}}}]})
    assert in_batch.status_code == 422
    assert in_batch.json()["errors"][0]["field"] == "items[1].pod.spec.containers"
    twice = await agent_http.post("/samples/random/batch", json={"items": [  # known spec, then not
        {"pod": pod(cpu="1")}, {"pod": pod(cpu="1")}, {"pod": pod(cpu="lots")}]})
    assert twice.status_code == 422
    assert twice.json()["errors"][0]["field"] == "items[2].pod.spec.containers[0].resources." \
                                                 "requests.cpu"
    unknown = await agent_http.post("/samples/best", json={"pod": pod()})
    assert unknown.status_code == 404 and "round-robin" in unknown.json()["detail"]
    malformed = await agent_http.post("/samples/random", content=b"{nope")
    assert malformed.status_code == 400


async def test_batch_of_commits_answers_each_as_alone(agent_http: httpx.AsyncClient,
                                                      sim: SimServer) -> None:
    first, again, big = pod(cpu="1500m"), pod(), pod(cpu="1")
    items = [{"pod": first, "nodeName": "n-2"}, {"pod": big, "nodeName": "n-2"},
             {"pod": again, "nodeName": "n-3"}, {"pod": pod(), "nodeName": "n-9"}]
    response = await agent_http.post("/agent/scheduling-decisions", json={"items": items})
    assert response.status_code == 200, response.text
    answers = response.json()["items"]
    codes = [a["status"] for a in answers]
    # the two on n-2 race for its lock: one is made, the other conflicts (2 cpu in all)
    assert sorted(codes[:2]) == [201, 409] and codes[2:] == [201, 404]
    assert answers[codes.index(409)]["body"]["title"] == "SCHEDULING_CONFLICT"
    repeat = await agent_http.post("/agent/scheduling-decisions",
                             json={"items": [{"pod": again, "nodeName": "n-3"}]})
    assert repeat.json()["items"][0]["status"] == 200  # idempotent by uid
    made = [m["metadata"]["name"] for m in await member_pods(sim)]
    assert sorted(made) == sorted(p["metadata"]["name"] for p, c in
                                  zip((first, big, again), codes[:3], strict=True) if c == 201)
    no_uid = {"metadata": {"name": "x"}, "spec": first["spec"]}
    bad = await agent_http.post("/agent/scheduling-decisions",
                          json={"items": [{"pod": no_uid, "nodeName": "n-0"}]})
    [problem] = [a for a in bad.json()["items"] if a["status"] == 422]
    assert problem["body"]["errors"][0]["field"] == "items[0].pod.metadata.uid"


async def test_a_pod_named_as_krake_allows_becomes_a_kubernetes_pod(
    agent_http: httpx.AsyncClient, sim: SimServer
) -> None:
    """Shoal's namespace ``system:admin`` and name ``Web_1:a`` are no Kubernetes names: the
    member cluster's pod takes mapped ones, the same on every commit of it."""
    body = pod("Web_1:a")
    body["metadata"]["namespace"] = "system:admin"
    first = await commit(agent_http, body, "n-1")
    assert first.status_code == 201, first.text
    namespace, name = kube_name("system:admin"), kube_name("Web_1:a", 253, dots=True)
    assert first.json()["pod"] == {"name": name, "namespace": namespace,
                                   "uid": body["metadata"]["uid"]}  # fmt: skip
    assert namespace.startswith("system-admin-") and name.startswith("web-1-a-")
    assert [p["metadata"]["name"] for p in await member_pods(sim, namespace=namespace)] == [name]
    again = await commit(agent_http, body, "n-1")
    assert again.status_code == 200 and again.json()["created"] is False
    # a name that is a Kubernetes name stays as it is
    plain = pod("web-2.v1")
    assert (await commit(agent_http, plain, "n-2")).status_code == 201
    assert "web-2.v1" in [p["metadata"]["name"] for p in await member_pods(sim)]


async def test_after_a_restart_the_cluster_says_where_a_pod_already_is(
    start: AgentFactory, sim: SimServer
) -> None:
    """A fresh agent that has not listed the pod yet learns from the member cluster: the
    same uid on another node is refused as already committed there, another uid under
    the same name as a name taken; each answer names its reason."""
    body = pod()
    second = await restarted_after_commit(start, body)
    async with httpx.AsyncClient(base_url=second.url) as agent_http:
        moved = await commit(agent_http, body, "n-1")
        assert moved.status_code == 409
        assert moved.json()["detail"] == (
            f"pod uid {body['metadata']['uid']} is already committed to node n-0")
        assert moved.json()["errors"] == [{"field": "nodeName", "reason": "already committed"}]
        clash = await commit(agent_http, pod(name=body["metadata"]["name"]), "n-0")
        assert clash.status_code == 409 and clash.json()["title"] == "SCHEDULING_CONFLICT"
        assert clash.json()["errors"] == [{"field": "nodeName", "reason": "name taken"}]
    [member] = await member_pods(sim)
    assert member["spec"]["nodeName"] == "n-0"


async def test_the_answer_times_each_phase_in_milliseconds(
    agent_http: httpx.AsyncClient, agent: AgentServer
) -> None:
    committer = agent.agent.committer
    post = committer._post

    async def slow_post(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.05)  # the member cluster takes at least 50 ms
        return await post(*args, **kwargs)

    committer._post = slow_post  # type: ignore[method-assign]
    body = pod()
    made = (await commit(agent_http, body, "n-1")).json()
    timings = made["timings"]
    assert 50 <= timings["createMs"] <= timings["totalMs"]
    assert all(isinstance(v, float) and round(v, 3) == v for v in timings.values())
    again = (await commit(agent_http, body, "n-1")).json()  # a repeat: found, nothing made
    assert again["nodeName"] == "n-1" and again["created"] is False
    assert set(again["timings"]) == {"totalMs"} and again["timings"]["totalMs"] >= 0
    assert again["pod"] == {"name": body["metadata"]["name"], "namespace": "default",
                            "uid": body["metadata"]["uid"]}  # fmt: skip


async def test_a_refusal_says_how_much_was_asked_and_is_left(agent_http: httpx.AsyncClient) -> None:
    assert (await commit(agent_http, pod(cpu="1500m"), "n-0")).status_code == 201
    refused = (await commit(agent_http, pod(cpu="1"), "n-0")).json()
    assert refused["detail"] == "node n-0: insufficient cpu (pod requests 1000, 500 available)"
    missing = (await commit(agent_http, pod(), "n-9")).json()
    assert missing["detail"] == "node n-9 not found in the cluster"
    assert missing["errors"] == [{"field": "nodeName", "reason": "no such node"}]
