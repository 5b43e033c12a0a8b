"""MultiBind: commit through the agents, trying the k candidates in order; first success wins.

A conflict (409: the node filled meanwhile), a missing node (404) or a busy
node (503) moves on to the next candidate. A commit whose outcome is unknown
(sent, then no answer) is never tried elsewhere, or the pod could end up in
two clusters: the same (cluster, node, uid) is retried until the agent says
what happened (a repeated commit of a uid is idempotent).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from shoal.scheduler.config import FleetConfig
from shoal.scheduler.pods.agents import AgentError, Agents
from shoal.scheduler.pods.work import Candidate, PodWork

COMMIT = "/agent/scheduling-decision"


@dataclass
class Outcome:
    bound: Candidate | None
    conflicts: int
    unknown: bool  # pinned: retry the same commit later


class MultiBind:
    def __init__(self, agents: Agents, config: FleetConfig) -> None:
        self.agents = agents
        self.config = config
        self.conflicts = 0
        self.commits = 0

    async def commit(self, work: PodWork) -> Outcome:
        started = time.perf_counter()
        tries: list[str] = []
        candidates = [work.pinned] if work.pinned is not None else work.candidates
        outcome = Outcome(None, 0, False)
        for node in candidates:
            agent = self.agents.by_cluster.get(node.cluster)
            where = f"{node.cluster}/{node.node}"
            if agent is None:
                tries.append(f"{where}: the cluster has no agent now")
                if work.pinned is not None:
                    outcome.unknown = True
                continue
            self.commits += 1
            try:
                status, answer = await self.agents.post(
                    agent, COMMIT, {"pod": work.body(), "nodeName": node.node},
                    self.config.commit_timeout)
            except AgentError as error:
                tries.append(f"{where}: {error}")
                if error.sent:
                    work.pinned, outcome.unknown = node, True
                    break
                continue
            if status in (200, 201):
                work.pinned = None
                outcome.bound = work.bound = node
                tries.append(f"{where}: bound")
                break
            detail = answer.get("detail", "") if isinstance(answer, dict) else ""
            tries.append(f"{where}: {status} {detail}".strip())
            if status == 409:
                outcome.conflicts += 1
                self.conflicts += 1
            if work.pinned is not None and status != 503:
                work.pinned = None  # the agent answered: nothing is in doubt any more
            elif status == 503 and work.pinned is not None:
                outcome.unknown = True
        work.timings["commit"] = time.perf_counter() - started
        work.explanation["commit"] = {"summary": "; ".join(tries) or "no candidate to try",
                                      "tries": tries}
        return outcome


def describe(work: PodWork, outcome: Outcome) -> str:
    """Why an attempt placed nothing, in words."""
    if outcome.unknown:
        return "the commit's outcome is unknown (the agent did not answer); retrying it"
    sampling: dict[str, Any] = work.explanation.get("sampling", {})
    if not work.explanation.get("commit", {}).get("tries"):
        return "no node fits: " + sampling.get("summary", "no cluster agent asked")
    return "every candidate conflicted: " + work.explanation["commit"]["summary"]
