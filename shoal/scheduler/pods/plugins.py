"""The fleet pipeline's plugins, in the scheduler's one framework (``shoal.scheduler.framework``).

Registered by name in the framework's registry at their own extension points
(``sort``, ``pod-filters``, ``pod-scores``) and enabled in configuration
(``fleet.sort``, ``fleet.filters``, ``fleet.scores``), one job each.
"""

from __future__ import annotations

from typing import Any

from shoal.scheduler.framework import Plugin, register
from shoal.scheduler.pods.work import Candidate, PodWork


class SortPlugin(Plugin):
    def key(self, work: PodWork) -> Any:
        """Smaller keys are taken first."""
        raise NotImplementedError


class PodFilterPlugin(Plugin):
    def filter(self, work: PodWork, node: Candidate, taken: dict[tuple[str, str], dict[str, int]]
               ) -> str | None:
        """Why ``node`` cannot take the pod, or None; ``taken``: what this decision round
        already gave each (cluster, node)."""
        raise NotImplementedError


class PodScorePlugin(Plugin):
    def score(self, work: PodWork, node: Candidate) -> float:
        """0–100."""
        raise NotImplementedError


@register("sort")
class PrioritySort(SortPlugin):
    """Vela's default: higher priority first, then older first."""

    name = "priority"

    def key(self, work: PodWork) -> Any:
        created = work.pod.metadata.created
        return (-work.pod.spec.priority, created.timestamp() if created else work.enqueued)


@register("pod-filters")
class FitsSampled(PodFilterPlugin):
    """The node's free resources, as sampled, less what this round already put on it.

    Parallel samples of one batch may return the same node for several pods;
    without this, all of them would commit to it and all but one conflict.
    """

    name = "fits-sampled"

    def filter(self, work: PodWork, node: Candidate, taken: dict[tuple[str, str], dict[str, int]]
               ) -> str | None:
        used = taken.get((node.cluster, node.node), {})
        for resource, value in work.requests.items():
            if value and used.get(resource, 0) + value > node.available.get(resource, 0):
                return f"insufficient {resource}"
        return None


@register("pod-scores")
class AgentScore(PodScorePlugin):
    """The score the cluster agent's own plugins gave the node (least-allocated, geo)."""

    name = "agent-score"

    def score(self, work: PodWork, node: Candidate) -> float:
        return node.score


@register("pod-scores")
class Balanced(PodScorePlugin):
    """Share of cpu and memory left after placing: spreads load across the sampled nodes."""

    name = "least-allocated"

    def score(self, work: PodWork, node: Candidate) -> float:
        shares = [(node.available.get(r, 0) - work.requests.get(r, 0)) / node.total[r]
                  for r in ("cpu", "memory") if node.total.get(r)]
        return 100 * sum(shares) / len(shares) if shares else 0.0
