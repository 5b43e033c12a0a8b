"""Server-side apply bookkeeping (simplified): each field manager's last applied configuration.

A manager owns the fields of its last applied configuration. Applying again
removes the fields it stopped applying (unless another manager applies them too);
changing a field another manager applied with a different value is a conflict
unless forced, and forcing takes the field away from the other manager.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shoal.machinery.patch import leaf_paths, remove_path, strategic_merge
from shoal.machinery.types import Obj
from shoal.sim.admission import pin_name
from shoal.sim.resources import ResourceType
from shoal.sim.store import ApiError, clone, now

Path = tuple[Any, ...]


def managed_fields_entry(manager: str, rt: ResourceType, subresource: str | None) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": rt.api_version,
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": {},
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def applied_configuration(rt: ResourceType, ns: str, name: str, body: Any,
                          manager: str | None) -> Obj:
    """The body of an apply patch as the configuration ``manager`` now applies."""
    if not manager:
        raise ApiError(422, "Invalid",
                       "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required "
                       "value: is required for apply patch")
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "an apply patch must be an object")
    applied = clone(body)
    pin_name(rt, applied, ns, name)
    return applied


class FieldManagers:
    """Last applied configuration per object uid and manager."""

    def __init__(self) -> None:
        self.applied: dict[str, dict[str, Obj]] = {}

    def _others(self, uid: str, manager: str) -> Iterator[tuple[str, Obj]]:
        for other, cfg in list(self.applied.get(uid, {}).items()):
            if other != manager:
                yield other, cfg

    def merge(self, rt: ResourceType, old: Obj, applied: Obj, manager: str, force: bool,
              subresource: str | None) -> tuple[Obj, bool]:
        """``old`` with ``applied`` merged in; also whether it carries a resourceVersion."""
        uid = old["metadata"]["uid"]
        paths = leaf_paths({k: v for k, v in applied.items() if k not in ("apiVersion", "kind")})
        paths.pop(("metadata", "name"), None)
        paths.pop(("metadata", "namespace"), None)
        if not force:
            self._check_conflicts(uid, manager, paths, leaf_paths(old))
        merged = clone(old)
        previous = self.applied.get(uid, {}).get(manager)
        if previous is not None:
            gone = set(leaf_paths(previous)) - set(paths)
            for _, cfg in self._others(uid, manager):
                gone -= set(leaf_paths(cfg))
            for p in sorted(gone, key=len, reverse=True):
                remove_path(merged, p)
        if force:
            for other, cfg in self._others(uid, manager):
                kept = clone(cfg)
                for p in paths:
                    remove_path(kept, p)
                self.applied[uid][other] = kept
        body = clone(applied)
        rv = body["metadata"].pop("resourceVersion", None)
        merged = strategic_merge(merged, body)
        managers = [m for m in merged["metadata"].get("managedFields") or ()
                    if m.get("manager") != manager]
        managers.append(managed_fields_entry(manager, rt, subresource))
        merged["metadata"]["managedFields"] = managers
        merged["metadata"]["resourceVersion"] = rv or old["metadata"]["resourceVersion"]
        if subresource is None and "status" in rt.subresources:
            merged["status"] = old.get("status", {})
        return merged, bool(rv)

    def _check_conflicts(self, uid: str, manager: str, paths: dict[Path, Any],
                         current: dict[Path, Any]) -> None:
        conflicts = []
        for other, cfg in self._others(uid, manager):
            theirs = leaf_paths(cfg)
            for p, v in paths.items():
                if p in theirs and theirs[p] != v and current.get(p) == theirs[p]:
                    conflicts.append((other, p))
        if not conflicts:
            return
        msg = "; ".join(f'conflict with "{m}": .{".".join(map(str, p))}'
                        for m, p in conflicts[:5])
        raise ApiError(
            409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): {msg}",
            {"causes": [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}"',
                         "field": "." + ".".join(map(str, p))} for m, p in conflicts]},
        )

    def record(self, uid: str, manager: str, applied: Obj) -> None:
        self.applied.setdefault(uid, {})[manager] = applied

    def forget(self, uid: str) -> None:
        """Drop the configurations applied to a deleted object."""
        self.applied.pop(uid, None)
