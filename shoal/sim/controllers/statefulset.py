"""StatefulSet → pods ``{name}-0 … {name}-{replicas-1}`` labelled with their revision.

Pods of an older template revision, beyond the replica count, or finished are
deleted and re-created under the same name.
"""

from __future__ import annotations

from shoal.machinery.types import Obj
from shoal.sim.controllers.base import Controllers
from shoal.sim.objects import PODS, STATEFULSETS, count_ready, pod_active, template_hash

KEY = STATEFULSETS


def reconcile(c: Controllers, sts: Obj) -> None:
    ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
    desired = int(sts["spec"].get("replicas", 1))
    revision = f"{name}-{template_hash(sts['spec']['template'])}"
    pods = {p["metadata"]["name"]: p for p in c.owned(sts, PODS)}
    for pname, p in list(pods.items()):
        idx = pname.rsplit("-", 1)[-1]
        stale = p["metadata"].get("labels", {}).get("controller-revision-hash") != revision
        if not idx.isdigit() or int(idx) >= desired or stale or not pod_active(p):
            c.delete(PODS, p)
            del pods[pname]
    for i in range(desired):
        pname = f"{name}-{i}"
        if pname not in pods and c.store.get(PODS, ns, pname) is None:
            pods[pname] = c.new_pod(sts, sts["spec"]["template"], pname, {
                "controller-revision-hash": revision,
                "statefulset.kubernetes.io/pod-name": pname,
                "apps.kubernetes.io/pod-index": str(i),
            })
    n, ready = len(pods), count_ready(pods.values())
    c.set_status(STATEFULSETS, sts, {
        "replicas": n, "readyReplicas": ready, "availableReplicas": ready,
        "currentReplicas": n, "updatedReplicas": n,
        "currentRevision": revision, "updateRevision": revision, "collisionCount": 0,
    })
