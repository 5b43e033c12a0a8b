"""Resources fit (filter) and least-/most-allocated (scores), as Kubernetes' NodeResourcesFit."""

from __future__ import annotations

from shoal.agent.cache import NodeInfo
from shoal.agent.framework import FilterPlugin, ScorePlugin, register
from shoal.agent.pod import PodRequest
from shoal.machinery.resources import fits

SCORED = ("cpu", "memory")


@register("filters")
class ResourcesFit(FilterPlugin):
    """The node's allocatable must hold what its pods (and commits in flight) plus this pod ask."""

    name = "resources-fit"

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        short = fits(node.requested, node.allocatable, pod.requests)
        return None if short is None else f"insufficient {short}"


def used_fractions(pod: PodRequest, node: NodeInfo) -> list[float]:
    """Per scored resource: the fraction of allocatable in use once the pod is there."""
    out = []
    for name in SCORED:
        total = node.allocatable.get(name, 0)
        if total > 0:
            used = node.requested.get(name, 0) + pod.requests.get(name, 0)
            out.append(min(max(used / total, 0.0), 1.0))
    return out


@register("scores")
class LeastAllocated(ScorePlugin):
    """Spread: the emptier the node would stay, the higher."""

    name = "least-allocated"

    def score(self, pod: PodRequest, node: NodeInfo) -> float | None:
        used = used_fractions(pod, node)
        return 100 * (1 - sum(used) / len(used)) if used else None


@register("scores")
class MostAllocated(ScorePlugin):
    """Pack: the fuller the node would be, the higher."""

    name = "most-allocated"

    def score(self, pod: PodRequest, node: NodeInfo) -> float | None:
        used = used_fractions(pod, node)
        return 100 * sum(used) / len(used) if used else None
