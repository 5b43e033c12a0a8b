"""The fleet pipeline's parts alone: queue order, k highest kept, MultiBind's unknown outcome."""

from __future__ import annotations

import asyncio
from typing import Any

from shoal.model.base import Metadata
from shoal.model.scheduler_config import FleetConfig
from shoal.scheduler.pods.agents import AgentError, AgentRef, Agents
from shoal.scheduler.pods.commit import MultiBind
from shoal.scheduler.pods.decision import Decider
from shoal.scheduler.pods.plugins import PrioritySort
from shoal.scheduler.pods.queue import PodQueue
from shoal.scheduler.pods.work import Candidate, PodWork
from shoal.testing.pods import pod


def work(name: str, priority: int = 0, cpu: str = "100m") -> PodWork:
    made = pod(name, cpu=cpu, priority=priority)
    made.metadata = Metadata(name=name, namespace="default", uid=f"uid-{name}")
    return PodWork.of(made)


def node(cluster: str, name: str, score: float, cpu: int = 4000) -> Candidate:
    amounts = {"cpu": cpu, "memory": 2**33, "pods": 100}
    return Candidate(cluster, name, score, dict(amounts), dict(amounts))


async def test_queue_takes_priority_then_age_and_waits_out_back_off() -> None:
    queue = PodQueue(PrioritySort().key)
    for item in (work("old"), work("urgent", priority=5), work("new")):
        queue.add(item)
    later = work("later")
    queue.add_after(later, 0.05)
    assert [w.key[1] for w in await queue.take(10)] == ["urgent", "old", "new"]
    queue.add(work("old"))  # still taken: not twice
    assert [w.key[1] for w in await asyncio.wait_for(queue.take(10), 1)] == ["later"]


def test_decision_keeps_the_k_highest_first() -> None:
    decider = Decider(FleetConfig(candidates=2))
    one = work("p")
    one.candidates = [node("a", "n1", 10), node("b", "n2", 90), node("c", "n3", 50),
                      node("c", "small", 99, cpu=50)]
    decider.decide([one])
    assert [(c.cluster, c.node) for c in one.candidates] == [("b", "n2"), ("c", "n3")]
    assert one.explanation["decision"]["rejected"] == {"insufficient cpu": 1}


def test_a_batch_does_not_pile_onto_one_node() -> None:
    decider = Decider(FleetConfig(candidates=1))
    pods = [work(f"p{i}", cpu="3") for i in range(2)]
    for each in pods:
        each.candidates = [node("a", "best", 90), node("a", "next", 80)]
    decider.decide(pods)
    assert [p.candidates[0].node for p in pods] == ["best", "next"]


class Unanswered(Agents):
    """The first commit is sent and never answered; any other would succeed."""

    def __init__(self) -> None:
        super().__init__(0.1)
        self.calls: list[str] = []

    async def post(self, agent: AgentRef, path: str, body: Any, timeout: float,
                   method: str = "POST") -> tuple[int, Any]:
        self.calls.extend(item["nodeName"] for item in body["items"])
        if len(self.calls) == 1:
            raise AgentError("no answer within 100 ms", True)
        return 200, {"items": [{"status": 201, "body": {}} for _ in body["items"]]}


async def test_an_unanswered_commit_is_retried_where_it_went_never_elsewhere() -> None:
    agents = Unanswered()
    for cluster in ("a", "b"):
        agents.by_cluster[cluster] = AgentRef(cluster, "default", f"http://{cluster}", {})
    binder = MultiBind(agents, FleetConfig())
    one = work("p")
    one.candidates = [node("a", "n1", 90), node("b", "n2", 80)]
    first = await binder.commit(one)
    assert first.unknown and first.bound is None and agents.calls == ["n1"]
    again = await binder.commit(one)
    assert again.bound is not None and again.bound.node == "n1" and agents.calls == ["n1", "n1"]
    assert one.pinned is None


class SlowCluster(Agents):
    """Commits to cluster ``slow`` answer only when ``release`` is set; others at once."""

    def __init__(self) -> None:
        super().__init__(1.0)
        self.release = asyncio.Event()

    async def post(self, agent: AgentRef, path: str, body: Any, timeout: float,
                   method: str = "POST") -> tuple[int, Any]:
        if agent.cluster == "slow":
            await self.release.wait()
        return 200, {"items": [{"status": 201, "body": {}} for _ in body["items"]]}


async def test_a_pod_is_decided_when_its_own_agent_answers() -> None:
    agents = SlowCluster()
    for cluster in ("fast", "slow"):
        agents.by_cluster[cluster] = AgentRef(cluster, "default", f"http://{cluster}", {})
    quick, late = work("quick"), work("late")
    quick.candidates, late.candidates = [node("fast", "n1", 90)], [node("slow", "n2", 90)]
    decided: list[str] = []
    task = asyncio.create_task(MultiBind(agents, FleetConfig()).commit_many(
        [quick, late], lambda w, outcome: decided.append(w.key[1])))
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert decided == ["quick"] and not task.done()
    agents.release.set()
    outcomes = await task
    assert decided == ["quick", "late"] and all(o.bound is not None for o in outcomes)


async def test_takers_take_turns_and_linger_for_a_fuller_batch() -> None:
    queue = PodQueue(PrioritySort().key)
    first = asyncio.create_task(queue.take(10, linger=0.2))
    second = asyncio.create_task(queue.take(10, linger=0.2))
    queue.add(work("a"))
    await asyncio.sleep(0.05)
    queue.add(work("b"))  # while the first taker lingers: its batch
    assert [w.key[1] for w in await first] == ["a", "b"]
    assert not second.done()
    queue.add(work("c"))
    assert [w.key[1] for w in await asyncio.wait_for(second, 1)] == ["c"]
