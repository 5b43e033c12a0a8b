"""What every workload controller uses: its owned objects, new pods, status writes."""

from __future__ import annotations

from collections.abc import Callable

from shoal.machinery.types import Obj
from shoal.sim.nodes import NodeSet
from shoal.sim.objects import PODS, owner_ref
from shoal.sim.store import clone
from shoal.sim.verbs import Verbs


class Controllers:
    """The cluster pieces controllers act through: the API verbs and the node set."""

    def __init__(self, api: Verbs, nodes: NodeSet) -> None:
        self.api = api
        self.store = api.store
        self.nodes = nodes
        self.writing_status = False  # True while a controller stores its own object's status

    def owned(self, owner: Obj, key: str) -> list[Obj]:
        """Objects of bucket ``key`` that ``owner`` owns (from the store's owner index)."""
        out = []
        for k, ns, name in self.store.dependents(owner["metadata"]["uid"]):
            if k == key and (obj := self.store.get(k, ns, name)) is not None:
                out.append(obj)
        return out

    def create(self, key: str, obj: Obj) -> Obj:
        return self.api.create(self.store.rt(key), obj)

    def delete(self, key: str, obj: Obj) -> None:
        self.api.delete(self.store.rt(key), obj["metadata"]["namespace"], obj["metadata"]["name"])

    def reconcile(self, key: str, reconcile: Callable[[Controllers, Obj], None], ns: str,
                  name: str) -> None:
        """Run one controller on one object, if the object still exists."""
        obj = self.store.get(key, ns, name)
        if obj is not None:
            reconcile(self, obj)

    def new_pod(self, owner: Obj, template: Obj, name: str | None = None,
                extra_labels: dict[str, str] | None = None, node: str | None = None) -> Obj:
        """Create a pod from ``owner``'s template (named, or generated from the owner's name)."""
        meta = clone(template.get("metadata") or {})
        pod_meta: Obj = {
            "namespace": owner["metadata"]["namespace"],
            "labels": dict(meta.get("labels") or {}, **(extra_labels or {})),
            "ownerReferences": [owner_ref(owner)],
        }
        if meta.get("annotations"):
            pod_meta["annotations"] = meta["annotations"]
        if name:
            pod_meta["name"] = name
        else:
            pod_meta["generateName"] = owner["metadata"]["name"] + "-"
        spec = clone(template.get("spec") or {})
        if node:
            spec["nodeName"] = node
        return self.create(PODS, {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": pod_meta, "spec": spec})

    def set_status(self, key: str, obj: Obj, status: Obj, observed: bool = True) -> None:
        """Merge ``status`` into ``obj``'s (with ``observedGeneration`` unless told not to)."""
        merged = dict(obj.get("status") or {})
        if observed:
            merged["observedGeneration"] = obj["metadata"].get("generation", 1)
        merged.update(status)
        if merged == obj.get("status"):
            return
        new = dict(obj)
        new["metadata"] = dict(obj["metadata"])
        new["status"] = merged
        self.writing_status = True
        try:
            self.store.replace(self.store.rt(key), new, obj)
        finally:
            self.writing_status = False
