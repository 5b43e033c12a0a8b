"""Patch formats: JSON merge patch, JSON patch, strategic merge patch (simplified), apply.

Strategic merge is approximated the way most manifests need it: lists of objects
whose items carry a well-known key (containers by ``name``, container ports by
``containerPort``, service ports by ``port``, volume mounts by ``mountPath``…) are
merged item by item; other lists are replaced. ``$patch``, ``$setElementOrder``,
``$retainKeys`` and ``$deleteFromPrimitiveList`` directives are honoured or ignored.
"""

from __future__ import annotations

import copy
from typing import Any

from shoal.machinery.types import Obj

# request content type → patch kind
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}


class PatchError(ValueError):
    """A patch that cannot be applied (bad operation, failed test, bad path)."""


def patch_type(content_type: str) -> str | None:
    """The patch kind of a PATCH request's content type ("merge", "json", "strategic",
    "apply"); None for any other type."""
    return PATCH_TYPES.get(content_type.split(";")[0].strip().lower())


def patch_object(kind: str, doc: Obj, body: Any) -> Any:
    """Apply a merge, JSON or strategic merge patch to a copy of ``doc``."""
    if kind == "json":
        return json_patch(doc, body)
    if not isinstance(body, dict):
        what = "merge patch" if kind == "merge" else "strategic merge patch"
        raise PatchError(f"a {what} must be a JSON object")
    if kind == "merge":
        return merge_patch(copy.deepcopy(doc), body)
    return strategic_merge(copy.deepcopy(doc), body)


# -- RFC 7386 JSON merge patch ----------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# -- RFC 6902 JSON patch ------------------------------------------------------


def merge_diff(before: Any, after: Any) -> Any:
    """The merge patch that turns ``before`` into ``after`` (``merge_patch``'s inverse).

    Keys gone from a mapping are ``None``; anything but two mappings is replaced
    whole. ``after`` must hold no ``None`` (a merge patch cannot set one).
    """
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return after
    diff: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        if key not in before:
            diff[key] = value
        elif before[key] != value:
            diff[key] = merge_diff(before[key], value)
    return diff


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise PatchError(f"path not found: {p}")
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError) as exc:
                raise PatchError(f"bad index {p}") from exc
        else:
            raise PatchError(f"cannot descend into {p}")
    return cur


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError as exc:
                raise PatchError(f"bad index {last}") from exc
            if idx > len(parent):
                raise PatchError(f"index out of range {idx}")
            parent.insert(idx, value)
    else:
        raise PatchError("cannot add to a scalar")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    try:
        if isinstance(parent, dict):
            return parent.pop(last)
        if isinstance(parent, list):
            return parent.pop(int(last))
    except (KeyError, ValueError, IndexError) as exc:
        raise PatchError(f"path not found: {last}") from exc
    raise PatchError("cannot remove from a scalar")


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _walk(doc, parts)
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                _remove(doc, parts)
                doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise PatchError(f"test failed at {op['path']}")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc


# -- strategic merge patch (simplified) --------------------------------------

_MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "ports": ("containerPort", "port"),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey",),
    "resourceClaims": ("name",),
}


def _merge_key(field: str, items: list[Any]) -> str | None:
    keys = _MERGE_KEYS.get(field)
    if not keys:
        return None
    for key in keys:
        if all(isinstance(i, dict) and key in i for i in items):
            return key
    return None


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if not isinstance(current, list):
        current = []
    plain = [i for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_strip(i) for i in plain]
    key = _merge_key(field, plain + [i for i in current if isinstance(i, dict)])
    if key is None:
        return [_strip(i) for i in plain]
    result = [copy.deepcopy(i) for i in current]
    index = {i.get(key): n for n, i in enumerate(result) if isinstance(i, dict)}
    deletes = set()
    for item in patch:
        if not isinstance(item, dict):
            continue
        if item.get("$patch") == "delete":
            deletes.add(item.get(key))
            continue
        k = item.get(key)
        if k in index:
            result[index[k]] = strategic_merge(result[index[k]], item)
        else:
            index[k] = len(result)
            result.append(_strip(item))
    return [i for i in result if not (isinstance(i, dict) and i.get(key) in deletes)]


def _strip(value: Any) -> Any:
    """Drop patch directives from a value that is inserted as a whole."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return _strip(patch)
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(v, list):
                result[field] = [i for i in result[field] if i not in v]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, list):
            result[k] = _merge_list(k, result.get(k), v)
        elif isinstance(v, dict):
            merged = strategic_merge(result.get(k), v)
            if merged is None:
                result.pop(k, None)
            else:
                result[k] = merged
        else:
            result[k] = v
    return result


# -- server-side apply (simplified) -----------------------------------------


def leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    """Field paths of an applied configuration; keyed list items use their key."""
    out: dict[tuple[Any, ...], Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = value
        for k, v in value.items():
            out.update(leaf_paths(v, (*prefix, k)))
    elif isinstance(value, list) and prefix:
        key = _merge_key(str(prefix[-1]), value)
        if key is None:
            out[prefix] = value
        else:
            for item in value:
                out.update(leaf_paths(item, (*prefix, f"{key}={item.get(key)}")))
    else:
        out[prefix] = value
    return out


def remove_path(doc: Any, path: tuple[Any, ...]) -> None:
    """Remove a field (as named by ``leaf_paths``) from ``doc`` if present."""
    cur = doc
    for n, part in enumerate(path):
        last = n == len(path) - 1
        if isinstance(cur, dict):
            if part not in cur:
                return
            if last:
                del cur[part]
                return
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, str) and "=" in part:
            key, _, val = part.partition("=")
            for i, item in enumerate(cur):
                if isinstance(item, dict) and str(item.get(key)) == val:
                    if last:
                        del cur[i]
                        return
                    cur = item
                    break
            else:
                return
        else:
            return
