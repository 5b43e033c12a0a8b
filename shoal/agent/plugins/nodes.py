"""Filters on the node itself: readiness, labels (nodeSelector), taints and tolerations."""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.agent.cache import HARD_EFFECTS, NodeInfo
from shoal.agent.framework import FilterPlugin, Reject, register
from shoal.agent.pod import PodRequest, Toleration
from shoal.agent.table import TAINT, Batch


@register("filters")
class NodeReady(FilterPlugin):
    """Only Ready nodes that are not cordoned."""

    name = "node-ready"

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        if not node.ready:
            return "node not ready"
        if node.unschedulable:
            return "node unschedulable"
        return None

    def vector_filter(self, batch: Batch, order: np.ndarray, reject: Reject) -> None:
        reject(batch.table.unready[order], "node not ready")
        reject(batch.table.cordoned[order], "node unschedulable")


@register("filters")
class NodeSelector(FilterPlugin):
    """Every ``spec.nodeSelector`` label must be on the node with that value."""

    name = "node-selector"

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        for key, value in pod.node_selector.items():
            if node.labels.get(key) != value:
                return f"node selector {key}={value}"
        return None

    def vector_filter(self, batch: Batch, order: np.ndarray, reject: Reject) -> None:
        """Nothing to reject: the numpy path takes only pods without a node selector."""


def tolerates(toleration: Toleration, taint: dict[str, Any]) -> bool:
    """Kubernetes' rule: empty key with Exists tolerates all; empty effect matches every effect."""
    if toleration.effect and toleration.effect != taint.get("effect"):
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.get("key")
    return toleration.key == taint.get("key") and toleration.value == (taint.get("value") or "")


@register("filters")
class TaintToleration(FilterPlugin):
    """Every NoSchedule/NoExecute taint of the node must be tolerated by the pod."""

    name = "taint-toleration"

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        for taint in node.taints:
            if taint.get("effect") not in HARD_EFFECTS:
                continue
            if not any(tolerates(t, taint) for t in pod.tolerations):
                return f"untolerated taint {taint.get('key')}"
        return None

    def vector_filter(self, batch: Batch, order: np.ndarray, reject: Reject) -> None:
        """The numpy path takes only pods without tolerations: every hard taint rejects."""
        reject(batch.table.tainted[order], TAINT)
