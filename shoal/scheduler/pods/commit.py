"""MultiBind: commit through the agents, trying the k candidates in order; first success wins.

A conflict (409: the node filled meanwhile), a missing node (404) or a busy
node (503) moves on to the next candidate. A commit whose outcome is unknown
(sent, then no answer) is never tried elsewhere, or the pod could end up in
two clusters: the same (cluster, node, uid) is retried until the agent says
what happened (a repeated commit of a uid is idempotent).

A batch of pods commits in steps: step n tries each unplaced pod's n-th
candidate, with one request per agent for all of that step's commits there
(``POST /agent/scheduling-decisions``), so a pod costs a fraction of a round
trip.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.model.scheduler_config import FleetConfig
from shoal.scheduler.pods.agents import AgentError, AgentRef, Agents
from shoal.scheduler.pods.work import Candidate, PodWork

COMMITS = "/agent/scheduling-decisions"


@dataclass
class Outcome:
    bound: Candidate | None
    conflicts: int
    unknown: bool  # pinned: retry the same commit later


@dataclass
class _Try:
    """One pod's way through the candidates."""

    work: PodWork
    candidates: list[Candidate]
    outcome: Outcome = field(default_factory=lambda: Outcome(None, 0, False))
    tries: list[str] = field(default_factory=list)
    done: bool = False
    reported: bool = False


class MultiBind:
    def __init__(self, agents: Agents, config: FleetConfig) -> None:
        self.agents = agents
        self.config = config
        self.conflicts = 0
        self.commits = 0

    async def commit(self, work: PodWork) -> Outcome:
        return (await self.commit_many([work]))[0]

    async def commit_many(self, works: list[PodWork],
                          decided: Callable[[PodWork, Outcome], None] | None = None
                          ) -> list[Outcome]:
        """Each pod's outcome; ``decided`` hears of each pod as soon as its own outcome is
        known (its agent answered), not when the slowest agent of the batch has."""
        started = time.perf_counter()
        pods = [_Try(w, [w.pinned] if w.pinned is not None else list(w.candidates))
                for w in works]
        step = 0
        while True:
            groups: dict[str, list[tuple[_Try, Candidate]]] = defaultdict(list)
            for pod in pods:
                if pod.done or step >= len(pod.candidates):
                    continue
                node = pod.candidates[step]
                if node.cluster not in self.agents.by_cluster:
                    pod.tries.append(f"{node.cluster}/{node.node}: the cluster has no agent now")
                    if pod.work.pinned is not None:
                        pod.outcome.unknown = True
                    continue
                groups[node.cluster].append((pod, node))
            if not groups and all(p.done or step >= len(p.candidates) for p in pods):
                break
            await asyncio.gather(*(self._send(self.agents.by_cluster[c], items, step, started,
                                              decided)
                                   for c, items in groups.items()))
            step += 1
        for pod in pods:
            self._report(pod, started, decided)
        return [p.outcome for p in pods]

    @staticmethod
    def _report(pod: _Try, started: float,
                decided: Callable[[PodWork, Outcome], None] | None) -> None:
        """Once per pod: its commit timing and explanation, then ``decided``."""
        if pod.reported:
            return
        pod.reported = True
        pod.work.timings["commit"] = time.perf_counter() - started
        pod.work.explanation["commit"] = {
            "summary": "; ".join(pod.tries) or "no candidate to try", "tries": pod.tries}
        if decided is not None:
            decided(pod.work, pod.outcome)

    async def _send(self, agent: AgentRef, items: list[tuple[_Try, Candidate]], step: int,
                    started: float, decided: Callable[[PodWork, Outcome], None] | None
                    ) -> None:
        await self._post(agent, items)
        for pod, _ in items:  # bound, in doubt, or out of candidates: its outcome is known
            if pod.done or step + 1 >= len(pod.candidates):
                self._report(pod, started, decided)

    async def _post(self, agent: AgentRef, items: list[tuple[_Try, Candidate]]) -> None:
        self.commits += len(items)
        body = {"items": [{"pod": p.work.body(), "nodeName": n.node} for p, n in items]}
        try:
            status, answer = await self.agents.post(agent, COMMITS, body,
                                                    self.config.commit_timeout)
            if status != 200:
                detail = answer.get("detail", "") if isinstance(answer, dict) else ""
                answers = [(status, answer if isinstance(answer, dict) else {})] * len(items)
                if status == 404:  # an agent without the batch route: nothing was done
                    answers = [(503, {"detail": f"404 {detail}".strip()})] * len(items)
            else:
                answers = [(a["status"], a["body"]) for a in answer["items"]]
        except AgentError as error:
            for pod, node in items:
                pod.tries.append(f"{node.cluster}/{node.node}: {error}")
                if error.sent:
                    pod.work.pinned, pod.outcome.unknown, pod.done = node, True, True
            return
        for (pod, node), (code, reply) in zip(items, answers, strict=True):
            self._answered(pod, node, code, reply)

    def _answered(self, pod: _Try, node: Candidate, status: int, answer: Any) -> None:
        work, outcome, where = pod.work, pod.outcome, f"{node.cluster}/{node.node}"
        if status in (200, 201):
            work.pinned = None
            outcome.bound = work.bound = node
            pod.tries.append(f"{where}: bound")
            pod.done = True
            return
        detail = answer.get("detail", "") if isinstance(answer, dict) else ""
        pod.tries.append(f"{where}: {status} {detail}".strip())
        if status == 409:
            outcome.conflicts += 1
            self.conflicts += 1
        if work.pinned is not None and status != 503:
            work.pinned = None  # the agent answered: nothing is in doubt any more
        elif status == 503 and work.pinned is not None:
            outcome.unknown = True


def describe(work: PodWork, outcome: Outcome) -> str:
    """Why an attempt placed nothing, in words."""
    if outcome.unknown:
        return "the commit's outcome is unknown (the agent did not answer); retrying it"
    sampling: dict[str, Any] = work.explanation.get("sampling", {})
    if sampling.get("nowhere"):
        return str(sampling["summary"])
    if not work.explanation.get("commit", {}).get("tries"):
        return "no node fits: " + sampling.get("summary", "no cluster agent asked")
    return "every candidate conflicted: " + work.explanation["commit"]["summary"]
