"""Storage keys of the kinds the simulation acts on, and small readers/builders of objects.

Shared by admission, the controllers, the scheduler and the kubelet, so each of
them reads owner references, conditions and pod requests the same way.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from shoal.machinery import resources
from shoal.machinery.types import Obj
from shoal.sim.store import now

PodKey = tuple[str, str]  # (namespace, name)

PODS = "/pods"
NODES = "/nodes"
NAMESPACES = "/namespaces"
SERVICES = "/services"
DEPLOYMENTS = "apps/deployments"
REPLICASETS = "apps/replicasets"
STATEFULSETS = "apps/statefulsets"
DAEMONSETS = "apps/daemonsets"
JOBS = "batch/jobs"
CRDS = "apiextensions.k8s.io/customresourcedefinitions"

# workload kinds with a pod template, by the kind named in their pods' ownerReferences
WORKLOADS = {
    "Deployment": DEPLOYMENTS,
    "ReplicaSet": REPLICASETS,
    "StatefulSet": STATEFULSETS,
    "DaemonSet": DAEMONSETS,
    "Job": JOBS,
}


def template_hash(template: Any) -> str:
    return hashlib.sha1(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).hexdigest()[:10]


def pod_key(obj: Obj) -> PodKey:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def controller_of(obj: Obj) -> Obj | None:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def owner_ref(owner: Obj) -> Obj:
    """The controller ownerReference a dependent of ``owner`` carries."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def condition(ctype: str, status: str, reason: str = "", message: str = "") -> Obj:
    cond: Obj = {"type": ctype, "status": status, "lastTransitionTime": now()}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def condition_true(obj: Obj, ctype: str, default: bool = False) -> bool:
    """Whether ``status.conditions`` has ``ctype`` True (``default`` when it is absent)."""
    for c in obj.get("status", {}).get("conditions") or ():
        if c.get("type") == ctype:
            return bool(c.get("status") == "True")
    return default


def pod_requests(pod: Obj) -> tuple[int, int]:
    """(millicores, bytes) a pod takes from its node, as Kubernetes counts them."""
    requested = resources.pod_requests(pod.get("spec") or {})
    return requested.get("cpu", 0), requested.get("memory", 0)


def pod_ready(pod: Obj) -> bool:
    return condition_true(pod, "Ready")


def pod_active(pod: Obj) -> bool:
    """Neither finished nor being deleted: the pod counts towards its controller's replicas."""
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") and not pod[
        "metadata"
    ].get("deletionTimestamp")


def pod_finished(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def count_ready(pods: Any) -> int:
    return sum(1 for p in pods if pod_ready(p))
