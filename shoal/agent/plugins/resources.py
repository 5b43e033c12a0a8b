"""Resources fit (filter) and least-/most-allocated (scores), as Kubernetes' NodeResourcesFit."""

from __future__ import annotations

import numpy as np

from shoal.agent.cache import NodeInfo
from shoal.agent.framework import FilterPlugin, Reject, ScorePlugin, register
from shoal.agent.pod import PodRequest
from shoal.agent.table import RESOURCES, Batch
from shoal.machinery.resources import fits

SCORED = ("cpu", "memory")


@register("filters")
class ResourcesFit(FilterPlugin):
    """The node's allocatable must hold what its pods (and commits in flight) plus this pod ask."""

    name = "resources-fit"

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        short = fits(node.requested, node.allocatable, pod.requests)
        return None if short is None else f"insufficient {short}"

    def vector_filter(self, batch: Batch, order: np.ndarray, reject: Reject) -> None:
        table = batch.table
        for r, resource in enumerate(batch.resources):  # the order ``fits`` checks
            row = RESOURCES.index(resource)
            over = table.req[row][order] + batch.need[:, r, None] > table.alloc[row][order]
            reject(over, f"insufficient {resource}")


def used_fractions(pod: PodRequest, node: NodeInfo) -> list[float]:
    """Per scored resource: the fraction of allocatable in use once the pod is there."""
    out = []
    for name in SCORED:
        total = node.allocatable.get(name, 0)
        if total > 0:
            used = node.requested.get(name, 0) + pod.requests.get(name, 0)
            out.append(min(max(used / total, 0.0), 1.0))
    return out


def mean_used(batch: Batch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``used_fractions``' mean for each pod of ``batch`` on each node of its row of ``rows``,
    and where the node has any scored resource (cpu and memory are the table's first two)."""
    table = batch.table
    alloc = table.alloc[:2][:, rows]
    used = table.req[:2][:, rows] + batch.full[:, :2].T[:, :, None]
    has = alloc > 0
    fraction = np.clip(np.divide(used, alloc, out=np.zeros_like(used), where=has), 0, 1)
    counted = has.sum(axis=0)
    mean = np.divide(fraction.sum(axis=0), counted, out=np.zeros(rows.shape), where=counted > 0)
    return mean, counted > 0


@register("scores")
class LeastAllocated(ScorePlugin):
    """Spread: the emptier the node would stay, the higher."""

    name = "least-allocated"

    def score(self, pod: PodRequest, node: NodeInfo) -> float | None:
        used = used_fractions(pod, node)
        return 100 * (1 - sum(used) / len(used)) if used else None

    def vector_score(self, batch: Batch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, has = mean_used(batch, rows)
        return 100 * (1 - mean), has


@register("scores")
class MostAllocated(ScorePlugin):
    """Pack: the fuller the node would be, the higher."""

    name = "most-allocated"

    def score(self, pod: PodRequest, node: NodeInfo) -> float | None:
        used = used_fractions(pod, node)
        return 100 * sum(used) / len(used) if used else None

    def vector_score(self, batch: Batch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, has = mean_used(batch, rows)
        return 100 * mean, has
