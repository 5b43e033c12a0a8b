"""What a member cluster's nodes, pods and CRDs say of its status: pure, written once.

The cluster observer derives a push cluster's status with it (from the lists it
watches, reusing what did not change), a pull cluster's agent its own cluster's
(``observed_status``): the same fields, the same states, whoever looks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shoal.machinery.quantity import number
from shoal.machinery.resources import CPU, Amounts, add, amounts, pod_requests
from shoal.machinery.types import Obj
from shoal.model.base import Reason, ReasonCode
from shoal.model.kubernetes import ClusterNode, ClusterState, ClusterStatus
from shoal.model.placement import room_histogram

MAX_NODE_ENTRIES = 50
PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
CONDITION_KEYS = ("message", "reason", "status", "type")

def add_quantities(total: dict[str, float], more: dict[str, Any]) -> dict[str, float]:
    for name, value in more.items():
        total[name] = total.get(name, 0.0) + number(value)
    return total


def _condition(node: Obj, kind: str) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return bool(cond.get("status") == "True")
    return False


def pod_usage(pod: Obj) -> Obj | None:
    """What a pod takes from its node, as the observer keeps it; None when it takes nothing
    (not bound to a node yet, or finished)."""
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    return {"node": node, "requests": pod_requests(spec)}


def pod_key(pod: Obj) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


def requested(usages: Iterable[Obj]) -> dict[str, float]:
    """What the pods on the nodes request in total, in the units of ``allocatable``."""
    total: dict[str, int] = {}
    for usage in usages:
        add(total, usage["requests"])
    return {name: round(value / 1000 if name == CPU else value, 3)
            for name, value in sorted(total.items())}  # fmt: skip


def requested_per_node(usages: Iterable[Obj]) -> dict[str, Amounts]:
    """What the pods on each node request, as amounts (millicores, bytes)."""
    per_node: dict[str, Amounts] = {}
    for usage in usages:
        add(per_node.setdefault(usage["node"], {}), usage["requests"])
    return per_node


def takes_pods(node: Obj) -> bool:
    """Whether new pods may land on the node: Ready, not cordoned, under no pressure."""
    if not _condition(node, "Ready") or (node.get("spec") or {}).get("unschedulable"):
        return False
    return not any(_condition(node, p) for p in PRESSURE)


def node_room(nodes: Iterable[Obj], per_node: dict[str, Amounts]) -> Obj:
    """``node_summary``'s ``room``: what each node that takes pods has left, grouped
    (``shoal.model.placement.room_histogram``); the scheduler counts pods on it."""
    free: list[Amounts] = []
    for node in nodes:
        if not takes_pods(node):
            continue
        left = amounts((node.get("status") or {}).get("allocatable"))
        add(left, per_node.get(node["metadata"]["name"]) or {}, -1)
        free.append(left)
    return room_histogram(free)


def summarize_nodes(nodes: list[Obj]) -> tuple[list[Obj], int, bool]:
    """``status.node_summary`` (totals, then at most 50 nodes), Ready count, any pressure."""
    entries: list[Obj] = []
    capacity: dict[str, float] = {}
    allocatable: dict[str, float] = {}
    ready_count = 0
    pressure = False
    for node in nodes:
        status = node.get("status") or {}
        ready = _condition(node, "Ready")
        pressures = [p for p in PRESSURE if _condition(node, p)]
        ready_count += ready
        pressure = pressure or (ready and bool(pressures))
        capacity = add_quantities(capacity, status.get("capacity") or {})
        allocatable = add_quantities(allocatable, status.get("allocatable") or {})
        if len(entries) < MAX_NODE_ENTRIES:
            entry: Obj = {
                "name": node["metadata"]["name"],
                "ready": ready,
                "capacity": dict(status.get("capacity") or {}),
                "allocatable": dict(status.get("allocatable") or {}),
            }
            if pressures:
                entry["pressure"] = pressures
            entries.append(entry)
    summary: Obj = {
        "summary": True,
        "count": len(nodes),
        "ready": ready_count,
        "capacity": {k: round(v, 3) for k, v in sorted(capacity.items())},
        "allocatable": {k: round(v, 3) for k, v in sorted(allocatable.items())},
    }
    return [summary, *entries], ready_count, pressure


def krake_nodes(nodes: list[Obj]) -> list[ClusterNode]:
    """``status.nodes`` as Krake shows it: name and conditions of at most 50 nodes."""
    return [
        ClusterNode.model_validate(
            {
                "metadata": {"name": node["metadata"]["name"]},
                "status": {
                    "conditions": [
                        {key: str(cond.get(key) or "") for key in CONDITION_KEYS}
                        for cond in (node.get("status") or {}).get("conditions") or []
                    ]
                },
            }
        )
        for node in nodes[:MAX_NODE_ENTRIES]
    ]


OWN_REASONS = (ReasonCode.CLUSTER_NOT_REACHABLE, ReasonCode.KUBERNETES_ERROR)
"""The reasons an observer gives (and takes back when the cluster answers)."""


def next_state(current: ClusterState, ready: int, pressure: bool) -> ClusterState:
    """The state of a cluster that answered: FAILING_METRICS stays (the scheduler's), an
    OFFLINE one is CONNECTING for one write, then NOTREADY, UNHEALTHY or ONLINE."""
    if current is ClusterState.FAILING_METRICS:
        return current
    if current is ClusterState.OFFLINE:
        return ClusterState.CONNECTING
    if ready == 0:
        return ClusterState.NOTREADY
    if pressure:
        return ClusterState.UNHEALTHY
    return ClusterState.ONLINE


def unreachable(status: ClusterStatus, error: str, api_error: bool) -> ClusterStatus:
    """``status`` OFFLINE, with the reason: the cluster's API refused (``api_error``) or
    could not be reached."""
    status = status.model_copy(deep=True)
    status.state = ClusterState.OFFLINE
    code = ReasonCode.KUBERNETES_ERROR if api_error else ReasonCode.CLUSTER_NOT_REACHABLE
    status.reason = Reason(code=code, message=error[:500])
    return status


def observed_status(
    status: ClusterStatus, nodes: list[Obj], crds: Iterable[str], pods: Iterable[Obj] | None
) -> ClusterStatus:
    """``status`` with what the observer writes, from the cluster's nodes, CRD names and
    pods (None: not listed; a pod is kept as ``pod_usage`` keeps it, or whole)."""
    status = status.model_copy(deep=True)
    nodes = sorted(nodes, key=lambda node: str(node["metadata"]["name"]))
    summary, ready, pressure = summarize_nodes(nodes)
    status.nodes = krake_nodes(nodes)
    summary = [dict(summary[0]), *summary[1:]]
    usages: list[Obj] = []
    if pods is not None:
        for pod in pods:
            usage = pod if "requests" in pod and "node" in pod else pod_usage(pod)
            if usage is not None:
                usages.append(usage)
        summary[0]["requested"] = requested(usages)
    summary[0]["room"] = node_room(nodes, requested_per_node(usages))
    status.node_summary = summary
    status.custom_resources = sorted(crds)
    status.state = next_state(status.state, ready, pressure)
    if status.reason is not None and status.reason.code in OWN_REASONS:
        status.reason = None
    return status
