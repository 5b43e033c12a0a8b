"""ReplicaSet → ``replicas`` pods from its template; surplus pods go, unready and unbound first."""

from __future__ import annotations

from shoal.machinery.types import Obj
from shoal.sim.controllers.base import Controllers
from shoal.sim.objects import PODS, REPLICASETS, count_ready, pod_active, pod_ready

KEY = REPLICASETS


def reconcile(c: Controllers, rs: Obj) -> None:
    desired = int(rs["spec"].get("replicas", 1))
    pods = [p for p in c.owned(rs, PODS) if pod_active(p)]
    if len(pods) < desired:
        pods += [c.new_pod(rs, rs["spec"]["template"]) for _ in range(desired - len(pods))]
    elif len(pods) > desired:
        pods.sort(key=lambda p: (pod_ready(p), bool(p["spec"].get("nodeName"))))
        for p in pods[: len(pods) - desired]:
            c.delete(PODS, p)
        pods = pods[len(pods) - desired:]
    ready = count_ready(pods)
    c.set_status(REPLICASETS, rs, {"replicas": len(pods), "fullyLabeledReplicas": len(pods),
                                   "readyReplicas": ready, "availableReplicas": ready})
