"""Deployment → one ReplicaSet per pod template, named ``{name}-{template hash}``.

A template change creates the new ReplicaSet and deletes the old one: pods are
replaced at once, not rolled gradually. Status and conditions follow the
current ReplicaSet.
"""

from __future__ import annotations

from shoal.machinery.types import Obj
from shoal.sim.controllers.base import Controllers
from shoal.sim.objects import DEPLOYMENTS, REPLICASETS, condition, owner_ref, template_hash
from shoal.sim.store import clone

KEY = DEPLOYMENTS


def _replicaset(c: Controllers, d: Obj, desired: int, h: str) -> Obj:
    """The ReplicaSet for ``d``'s current template (created or resized)."""
    meta, spec = d["metadata"], d["spec"]
    current = next((rs for rs in c.owned(d, REPLICASETS)
                    if rs["metadata"].get("labels", {}).get("pod-template-hash") == h), None)
    if current is None:
        template = clone(spec["template"])
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = dict(tmeta.get("labels") or {}, **{"pod-template-hash": h})
        selector = clone(spec["selector"])
        selector.setdefault("matchLabels", {})["pod-template-hash"] = h
        return c.create(REPLICASETS, {
            "metadata": {
                "name": f"{meta['name']}-{h}",
                "namespace": meta["namespace"],
                "labels": tmeta["labels"],
                "annotations": {"deployment.kubernetes.io/desired-replicas": str(desired)},
                "ownerReferences": [owner_ref(d)],
            },
            "spec": {"replicas": desired, "selector": selector, "template": template},
        })
    if current["spec"].get("replicas") != desired:
        def resize(new: Obj) -> None:
            new["spec"]["replicas"] = desired

        return c.store.modify(REPLICASETS, current, resize)
    return current


def _conditions(d: Obj, rs_name: str, desired: int, ready: int, available: int) -> list[Obj]:
    ok, done = available >= desired, ready >= desired
    conds = [
        condition("Available", "True" if ok else "False",
                  "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
                  "Deployment has minimum availability." if ok
                  else "Deployment does not have minimum availability."),
        condition("Progressing", "True",
                  "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                  f'ReplicaSet "{rs_name}" has '
                  + ("successfully progressed." if done else "is progressing.")),
    ]
    old = (d.get("status") or {}).get("conditions") or []
    # unchanged conditions keep their transition times
    if [(x["type"], x["status"], x.get("reason")) for x in old] == [
            (x["type"], x["status"], x.get("reason")) for x in conds]:
        return list(old)
    return conds


def reconcile(c: Controllers, d: Obj) -> None:
    desired = int(d["spec"].get("replicas", 1))
    h = template_hash(d["spec"]["template"])
    current = _replicaset(c, d, desired, h)
    for rs in c.owned(d, REPLICASETS):
        if rs["metadata"]["uid"] != current["metadata"]["uid"]:
            c.delete(REPLICASETS, rs)
    st = current.get("status") or {}
    ready = int(st.get("readyReplicas", 0))
    replicas = int(st.get("replicas", 0))
    available = int(st.get("availableReplicas", 0))
    status: Obj = {
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": _conditions(d, current["metadata"]["name"], desired, ready, available),
    }
    if desired - available > 0:
        status["unavailableReplicas"] = desired - available
    elif "unavailableReplicas" in (d.get("status") or {}):
        status["unavailableReplicas"] = 0
    c.set_status(DEPLOYMENTS, d, status)
