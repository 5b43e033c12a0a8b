"""2-smart sampling: ask a random Cp % of the agents for Np of their nodes, each with a deadline.

A batch of pods goes to the agents in one request per agent (the agents'
batch route), so a pod costs a fraction of a round trip; the pods of a batch
that share a constraint set draw their own random clusters, and an agent
drawn by several sets answers all their pods in that one request. An
agent late past the deadline costs the deadline once: it is marked and
skipped until it answers its health probe again. The deadline stretches
while the agents that answer all answer slowly (see ``Sampler.deadline``).
"""

from __future__ import annotations

import asyncio
import math
import random
import time

from shoal.machinery.types import Obj
from shoal.model.scheduler_config import FleetConfig
from shoal.scheduler.pods.agents import AgentError, AgentRef, Agents
from shoal.scheduler.pods.work import Candidate, PodWork

SLACK = 2.5
STRETCH = 10.0


def clusters_to_ask(eligible: int, config: FleetConfig) -> int:
    """Cp % of the eligible clusters, at least ``min_clusters`` (when there are that many)."""
    wanted = math.ceil(eligible * config.clusters_percent / 100)
    return min(eligible, max(wanted, config.min_clusters))


class Sampler:
    def __init__(self, agents: Agents, config: FleetConfig) -> None:
        self.agents = agents
        self.config = config
        self.random = random.Random()
        self.typical = 0.0  # moving average of the time answers take (agents that answer)

    async def sample(self, groups: dict[tuple[str, ...], list[PodWork]]) -> None:
        """Fill each pod's ``candidates`` (unranked) and ``explanation['sampling']``.

        Each group (pods with the same cluster constraints) draws its own Cp % of the
        clusters it may use; an agent chosen by several groups gets all their pods in one
        request.
        """
        started = time.perf_counter()
        keep = {"keep": self.config.keep} if self.config.keep else {}
        plans: list[tuple[list[PodWork], list[AgentRef], int, bool]] = []
        asked: dict[str, tuple[AgentRef, list[Obj], dict[int, int]]] = {}
        for constraints, batch in groups.items():
            matching = self.agents.matching(constraints)
            nowhere = not matching  # see ``enough``
            eligible = [agent for agent in matching if agent.marked is None]
            chosen = self.random.sample(eligible, clusters_to_ask(len(eligible), self.config))
            plans.append((batch, chosen, len(eligible), nowhere))
            items = [{"pod": w.sample_body(), "nodesToSampleBp": self.config.nodes_bp, **keep}
                     for w in batch]
            for agent in chosen:
                _, body, where = asked.setdefault(agent.cluster, (agent, [], {}))
                for work, item in zip(batch, items, strict=True):
                    where[id(work)] = len(body)
                    body.append(item)
        answers = dict(zip(asked, await asyncio.gather(
            *(self._ask(agent, {"items": body}) for agent, body, _ in asked.values())),
            strict=True))
        seconds = time.perf_counter() - started
        known = len(self.agents.by_cluster)
        for batch, chosen, usable, nowhere in plans:
            for work in batch:
                self._found(work, chosen, answers, asked, known, usable, nowhere)
                work.timings["sampling"] = seconds

    def _found(self, work: PodWork, chosen: list[AgentRef],
               answers: dict[str, tuple[str, list[Obj] | None]],
               asked: dict[str, tuple[AgentRef, list[Obj], dict[int, int]]],
               known: int, eligible: int, nowhere: bool) -> None:
        clusters: dict[str, Obj] = {}
        work.candidates = []
        for agent in chosen:
            answer, items = answers[agent.cluster]
            if items is None:
                clusters[agent.cluster] = {"answer": answer}
                continue
            item = items[asked[agent.cluster][2][id(work)]]
            nodes = item.get("nodes") or []
            work.candidates.extend(
                Candidate(agent.cluster, n["name"], n["score"], n["available"], n["total"])
                for n in nodes)
            rejected = (item.get("explanation") or {}).get("rejected") or {}
            clusters[agent.cluster] = {"answer": "ok",
                                       "eligible": item.get("eligible", len(nodes)),
                                       "examined": item.get("examined", 0),
                                       "rejected": rejected}
        answered = sum(1 for c in clusters.values() if c["answer"] == "ok")
        summary = (f"no cluster with an agent ({known}) matches the pod's cluster constraints"
                   if nowhere else
                   self._summary(known, eligible, clusters, answered, len(work.candidates)))
        work.explanation["sampling"] = {
            "summary": summary, "asked": len(chosen), "answered": answered,
            "clusters": clusters, **({"nowhere": True} if nowhere else {}),
        }

    def enough(self, work: PodWork) -> bool:
        """Whether the round is an attempt: enough agents answered, or no cluster may take
        the pod at all (its own constraints, not the agents, are the trouble)."""
        found = work.explanation["sampling"]
        if found.get("nowhere"):
            return True
        return bool(found["asked"]) and (
            found["answered"] >= math.ceil(found["asked"] * self.config.min_answers))

    @staticmethod
    def _summary(known: int, eligible: int, clusters: dict[str, Obj], answered: int,
                 nodes: int) -> str:
        rejected: dict[str, int] = {}
        examined = 0
        for item in clusters.values():
            examined += item.get("examined", 0)
            for reason, count in (item.get("rejected") or {}).items():
                rejected[reason] = rejected.get(reason, 0) + count
        text = (f"{len(clusters)} of {eligible} eligible clusters asked ({known} with an agent), "
                f"{answered} answered; {nodes} of {examined} examined nodes eligible")
        if rejected:
            text += ": " + ", ".join(f"{n} {r}" for r, n in sorted(rejected.items(),
                                                                     key=lambda kv: -kv[1]))
        late = [name for name, item in clusters.items() if item["answer"] != "ok"]
        if late:
            text += f"; no answer from {', '.join(sorted(late))}"
        return text

    async def _ask(self, agent: AgentRef, body: Obj) -> tuple[str, list[Obj] | None]:
        path = f"/samples/{self.config.strategy}/batch"
        deadline = self.deadline()
        started = time.perf_counter()
        try:  # at most half the deadline waiting for our own earlier requests to this agent
            async with asyncio.timeout(deadline / 2):
                await agent.busy.acquire()
        except TimeoutError:
            return "busy: earlier samples of this scheduler still in flight", None
        try:
            left = deadline - (time.perf_counter() - started)
            status, answer = await self.agents.post(agent, path, body, left)
        except AgentError as error:
            return str(error), None
        finally:
            agent.busy.release()
        if status != 200:
            detail = answer.get("detail", "") if isinstance(answer, dict) else ""
            return f"{status} {detail}".strip(), None
        self.typical += 0.1 * (time.perf_counter() - started - self.typical)
        items: list[Obj] = answer["items"]
        return "ok", items

    def deadline(self) -> float:
        """The configured deadline, or more while every agent answers slowly (an overloaded
        fleet, not one late agent): ``SLACK`` times the typical answer time, at most
        ``STRETCH`` times the configured deadline. Answers that come anyway are not thrown
        away to be asked for again, which would only load the fleet more."""
        configured = self.config.deadline
        return min(max(configured, SLACK * self.typical), STRETCH * configured)
