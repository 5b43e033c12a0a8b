"""CustomResourceDefinitions → served resource types (the apiextensions controller).

A CRD's served versions are registered (and so appear in discovery) as soon as
it is stored, and unregistered with their objects when it is deleted.
"""

from __future__ import annotations

from shoal.machinery.types import Obj
from shoal.sim.objects import CRDS
from shoal.sim.resources import ResourceType
from shoal.sim.store import Store

KEY = CRDS


def crd_changed(store: Store, etype: str, crd: Obj) -> None:
    registry = store.registry
    name = crd["metadata"]["name"]
    gone = registry.remove_crd(name)
    if etype == "DELETED":
        buckets: dict[str, ResourceType] = {}
        for rt in gone:
            buckets.setdefault(rt.key, rt)
        for key, rt in buckets.items():
            for obj in store.list(key):
                store.remove(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        return
    spec = crd["spec"]
    names = spec["names"]
    for v in spec.get("versions") or ():
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or {}
        registry.add(ResourceType(
            group=spec["group"],
            version=v["name"],
            kind=names["kind"],
            plural=names["plural"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=list(names.get("shortNames") or []),
            subresources=[s for s in ("status", "scale") if s in subs],
            categories=list(names.get("categories") or []),
            crd=name,
            printer_columns=list(v.get("additionalPrinterColumns") or []),
        ))
    # the storage bucket is shared by versions: the storage version owns the key
    for v in spec.get("versions") or ():
        if v.get("storage"):
            storage = registry.get(spec["group"], v["name"], names["plural"])
            if storage is not None:
                registry.by_key[storage.key] = storage
