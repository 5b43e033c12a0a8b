"""The API server's verbs on one cluster's store: create, get, update, patch, delete.

Each verb runs admission (validation, defaults), checks preconditions and
namespaces, and stores; deletes cascade to dependents (or orphan them) and empty
deleted namespaces. Controllers use the same verbs as clients.
"""

from __future__ import annotations

from typing import Any

from shoal.machinery.patch import PatchError, patch_object
from shoal.machinery.types import Obj
from shoal.sim.admission import (
    Defaults,
    check_crd_update,
    pin_name,
    select_job_pods_by_uid,
    validate,
)
from shoal.sim.apply import FieldManagers, applied_configuration, managed_fields_entry
from shoal.sim.objects import CRDS, JOBS, NAMESPACES
from shoal.sim.resources import ResourceType
from shoal.sim.store import ApiError, Store, clone, not_found

_SERVER_OWNED = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                 "generation", "selfLink")


class Verbs:
    """Verb semantics over a ``Store``; ``managers`` keeps server-side apply state."""

    def __init__(self, store: Store, defaults: Defaults) -> None:
        self.store = store
        self.defaults = defaults
        self.managers = FieldManagers()

    def _check_namespace(self, rt: ResourceType, obj: Obj, namespace: str | None) -> None:
        meta = obj.setdefault("metadata", {})
        if not rt.namespaced:
            return
        ns = namespace or meta.get("namespace") or "default"
        if meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise ApiError(
                400, "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        meta["namespace"] = ns
        nsobj = self.store.get(NAMESPACES, "", ns)
        if nsobj is None:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                           {"name": ns, "kind": "namespaces"})
        if nsobj["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", f"namespace {ns} is being terminated")

    def create(
        self, rt: ResourceType, obj: Obj, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        validate(rt, obj)
        obj = clone(obj)
        self._check_namespace(rt, obj, namespace)
        meta = obj["metadata"]
        for k in _SERVER_OWNED:
            meta.pop(k, None)
        self.defaults.fill(rt, obj, None)
        if rt.key == JOBS:
            select_job_pods_by_uid(obj)
        if dry_run:
            preview = clone(obj)
            preview["apiVersion"] = rt.api_version
            preview["kind"] = rt.kind
            if not meta.get("name"):
                meta["name"] = (meta.get("generateName") or "") + "dryrun"
            return preview
        return self.store.create(rt, obj)

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt, name)
        return obj

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        obj: Obj,
        subresource: str | None = None,
        dry_run: bool = False,
        precondition: bool = True,
    ) -> Obj:
        """Replace an object (PUT); ``subresource='status'`` replaces only the status."""
        validate(rt, obj)
        ns = namespace if rt.namespaced else ""
        old = self.get(rt, ns, name)
        obj = clone(obj)
        meta = pin_name(rt, obj, ns, name)
        rv = meta.get("resourceVersion")
        if precondition and rv and rv != old["metadata"]["resourceVersion"]:
            what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise ApiError(
                409, "Conflict",
                f'Operation cannot be fulfilled on {what} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": name, "group": rt.group, "kind": rt.plural},
            )
        if subresource == "status":
            new = clone(old)
            new["status"] = obj.get("status", {})
            obj = new
        elif subresource is not None:
            raise ApiError(404, "NotFound", f"subresource {subresource} not supported")
        else:
            if "status" in rt.subresources:
                if "status" in old:
                    obj["status"] = clone(old["status"])
                else:
                    obj.pop("status", None)
            for k in ("deletionTimestamp", "managedFields"):
                if k in old["metadata"] and k not in meta:
                    meta[k] = old["metadata"][k]
            self.defaults.fill(rt, obj, old)
            if rt.key == CRDS:
                check_crd_update(old, obj)
        if dry_run:
            return obj
        return self.store.replace(rt, obj, old)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        body: Any,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """Apply a patch of one of ``PATCH_TYPES``; apply creates missing objects."""
        if patch_type == "apply":
            return self._apply(rt, namespace, name, body, subresource, field_manager, force,
                               dry_run)
        old = self.get(rt, namespace, name)
        if patch_type == "strategic" and rt.crd is not None and isinstance(body, dict):
            raise ApiError(415, "UnsupportedMediaType",
                           "strategic merge patch is not supported for custom resources")
        try:
            new = patch_object(patch_type, old, body)
        except PatchError as exc:
            raise ApiError(422, "Invalid", str(exc)) from exc
        if not isinstance(new, dict):
            raise ApiError(422, "Invalid", "the patch did not produce an object")
        precondition = isinstance(body, dict) and bool(
            (body.get("metadata") or {}).get("resourceVersion"))
        if not precondition:
            new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
        if subresource is None and "status" in rt.subresources:
            new["status"] = old.get("status", {})
        return self.update(rt, namespace, name, new, subresource, dry_run, precondition)

    def _apply(self, rt: ResourceType, namespace: str, name: str, body: Any,
               subresource: str | None, manager: str | None, force: bool,
               dry_run: bool) -> Obj:
        ns = namespace if rt.namespaced else ""
        old = self.store.get(rt.key, ns, name)
        applied = applied_configuration(rt, ns, name, body, manager)
        assert manager
        if old is None:
            if subresource:
                raise not_found(rt, name)
            obj = clone(applied)
            obj["metadata"]["managedFields"] = [managed_fields_entry(manager, rt, subresource)]
            stored = self.create(rt, obj, ns or None, dry_run)
        else:
            merged, precondition = self.managers.merge(rt, old, applied, manager, force,
                                                       subresource)
            stored = self.update(rt, ns, name, merged, subresource, dry_run, precondition)
        if not dry_run:
            self.managers.record(stored["metadata"]["uid"], manager, applied)
        return stored

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        propagation: str = "Background",
        dry_run: bool = False,
        precondition_rv: str | None = None,
        precondition_uid: str | None = None,
    ) -> Obj:
        ns = namespace if rt.namespaced else ""
        old = self.get(rt, ns, name)
        if (precondition_rv and precondition_rv != old["metadata"]["resourceVersion"]) or (
            precondition_uid and precondition_uid != old["metadata"]["uid"]
        ):
            raise ApiError(409, "Conflict", f'Precondition failed for {rt.plural} "{name}"')
        if dry_run:
            return old
        uid = old["metadata"]["uid"]
        removed = self.store.remove(rt, ns, name)
        assert removed is not None

        def orphan(dep: Obj) -> None:
            refs = dep["metadata"].get("ownerReferences") or ()
            dep["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]

        for key, dns, dname in self.store.dependents(uid):
            drt = self.store.registry.by_key.get(key)
            dep = self.store.get(key, dns, dname)
            if drt is None or dep is None:
                continue
            if propagation == "Orphan":
                self.store.modify(key, dep, orphan)
            else:
                self.delete(drt, dns, dname, propagation)
        if rt.key == NAMESPACES:
            self._empty_namespace(name)
        self.managers.forget(uid)
        return removed

    def _empty_namespace(self, namespace: str) -> None:
        for key in list(self.store.objects):
            krt = self.store.registry.by_key.get(key)
            if krt is None or not krt.namespaced:
                continue
            for obj in self.store.list(key, namespace):
                if self.store.get(key, namespace, obj["metadata"]["name"]) is not None:
                    self.delete(krt, namespace, obj["metadata"]["name"])
