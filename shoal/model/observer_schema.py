"""Observer schemas: which fields of an application's objects Shoal keeps in step.

An application's ``spec.observer_schema`` lists, per manifest object, the fields
that are *observed*: a change made to one of them on the member cluster by
someone else is reverted, a change to any other field is left alone. The format
is Krake's (docs/observer-schema.md):

- each entry names its object by ``apiVersion``, ``kind`` and ``metadata.name``;
  every other value is ``null`` (observed) or a dict or list of such values;
- each list ends with a control dict, ``observer_schema_list_min_length`` and
  ``observer_schema_list_max_length`` (0: no maximum): a list whose length leaves
  that range counts as changed, and observing an element does not require it;
- an object without an entry gets the default schema, which observes every
  field its manifest sets, with each list held to the manifest's length.

The rules here are pure (dicts in, dicts out): the kube controller applies them
(``shoal.copies.observing``) and the API validates with ``problems``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from shoal.machinery.paths import join

MIN_LENGTH = "observer_schema_list_min_length"
MAX_LENGTH = "observer_schema_list_max_length"
CURRENT_LENGTH = "observer_schema_list_current_length"

Obj = dict[str, Any]


# which object an entry is ------------------------------------------------------------


def same_object(entry: Any, obj: Any) -> bool:
    """Whether ``entry`` and ``obj`` name the same object (apiVersion, kind, name)."""
    if not isinstance(entry, dict) or not isinstance(obj, dict):
        return False
    meta_a, meta_b = entry.get("metadata"), obj.get("metadata")
    if not isinstance(meta_a, dict) or not isinstance(meta_b, dict):
        return False
    return (
        entry.get("apiVersion") == obj.get("apiVersion")
        and entry.get("kind") == obj.get("kind")
        and meta_a.get("name") == meta_b.get("name")
    )


def find(entries: list[Obj], obj: Obj) -> Obj | None:
    """The first of ``entries`` that names ``obj``'s object."""
    return next((entry for entry in entries if same_object(entry, obj)), None)


# the default schema ------------------------------------------------------------------


def default_schema(obj: Obj) -> Obj:
    """What is observed of ``obj`` without a schema of its own: every field it sets.

    A Service of type LoadBalancer also has its ingress addresses observed, as in Krake.
    """
    schema = _default_dict(obj)
    schema["apiVersion"] = obj["apiVersion"]
    schema["kind"] = obj["kind"]
    schema["metadata"]["name"] = obj["metadata"]["name"]
    spec = obj.get("spec")
    if isinstance(spec, dict) and spec.get("type") == "LoadBalancer":
        schema["status"] = {"load_balancer": {"ingress": None}}
    return schema


def _default_dict(value: dict[str, Any]) -> dict[str, Any]:
    return {key: _default(item) for key, item in value.items()}


def _default_list(value: list[Any]) -> list[Any]:
    length = len(value)
    return [_default(item) for item in value] + [{MIN_LENGTH: length, MAX_LENGTH: length}]


def _default(value: Any) -> Any:
    if isinstance(value, dict):
        return _default_dict(value)
    if isinstance(value, list):
        return _default_list(value)
    return None


def mangled(custom: list[Obj], manifest: list[Obj]) -> list[Obj]:
    """The schema in force: the user's entries, then a default one for each other object."""
    schemas = copy.deepcopy(custom)
    for obj in manifest:
        if find(schemas, obj) is None:
            schemas.append(default_schema(obj))
    return schemas


def schema_for(schemas: list[Obj], obj: Obj) -> Obj:
    """The entry of ``schemas`` for ``obj``, or its default schema."""
    return find(schemas, obj) or default_schema(obj)


# what is observed --------------------------------------------------------------------


def _camel(key: str) -> str:
    """``load_balancer`` → ``loadBalancer``: Krake's schemas may name fields in snake case."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _get(live: Any, key: str) -> Any:
    if not isinstance(live, dict):
        return None
    if key in live:
        return live[key]
    return live.get(_camel(key))


def observe(schema: Obj, live: Any) -> Obj:
    """The observed fields of ``live`` (one entry of ``status.last_observed_manifest``).

    Each list holds its observed elements that exist, then
    ``{observer_schema_list_current_length: n}``; a field the object does not
    have is ``None``.
    """
    out: Obj = {}
    for key, sub in schema.items():
        value = _get(live, key)
        if isinstance(sub, dict):
            out[key] = observe(sub, value) if isinstance(value, dict) else value
        elif isinstance(sub, list):
            out[key] = _observe_list(sub, value if isinstance(value, list) else [])
        else:
            out[key] = copy.deepcopy(value)
    return out


def _observe_list(schema: list[Any], items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for sub, item in zip(schema[:-1], items, strict=False):
        if isinstance(sub, dict) and isinstance(item, dict):
            out.append(observe(sub, item))
        elif isinstance(sub, list) and isinstance(item, list):
            out.append(_observe_list(sub, item))
        else:
            out.append(copy.deepcopy(item))
    out.append({CURRENT_LENGTH: len(items)})
    return out


def changed(schema: Obj, before: Obj, now: Obj) -> bool:
    """Whether an observed field differs between two observations (``observe``) of an object.

    ``status`` is observed (it shows in ``last_observed_manifest``) but never
    counts: the cluster writes it, and applying again would not bring it back.
    A ``namespace`` the object does not have (a cluster-wide object) is not compared.
    """
    return any(
        _differs(sub, before.get(key), now.get(key), key)
        for key, sub in schema.items()
        if key != "status"
    )


def _differs(sub: Any, before: Any, now: Any, key: str | None) -> bool:
    if isinstance(sub, dict) and isinstance(before, dict) and isinstance(now, dict):
        return any(_differs(s, before.get(k), now.get(k), k) for k, s in sub.items())
    if isinstance(sub, list) and isinstance(before, list) and isinstance(now, list):
        return _list_differs(sub, before, now)
    if key == "namespace" and now is None:
        return False
    return bool(before != now)


def _list_differs(sub: list[Any], before: list[Any], now: list[Any]) -> bool:
    old, new = before[:-1], now[:-1]
    for index, element in enumerate(sub[:-1]):
        if (index < len(old)) != (index < len(new)):
            return True  # an observed element came or went
        if index < len(old) and _differs(element, old[index], new[index], None):
            return True
    return not within(sub[-1], now[-1].get(CURRENT_LENGTH, 0) if now else 0)


def within(control: Any, length: int) -> bool:
    """Whether a list of ``length`` items keeps to its control dict (max 0: no maximum)."""
    if not isinstance(control, dict):
        return True
    low, high = control.get(MIN_LENGTH, 0), control.get(MAX_LENGTH, 0)
    return bool(length >= low and (high == 0 or length <= high))


# what is applied ---------------------------------------------------------------------

_IDENTITY = ("apiVersion", "kind")
_META_IDENTITY = ("name", "namespace")


def applied(manifest: list[Obj], schemas: list[Obj], previous: list[Obj]) -> list[Obj]:
    """The objects to apply: ``manifest``, plus each observed field it does not set whose
    value an earlier apply recorded (``previous``, the last ``last_applied_manifest``).

    That is how an observed field the manifest leaves to the cluster (a Deployment's
    replicas) is put back to the value it first had. Where an object goes (apiVersion,
    kind, name, namespace) is never taken from the record.
    """
    out = []
    for obj in manifest:
        new = copy.deepcopy(obj)
        old = find(previous, obj)
        if old is not None:
            _keep_dict(new, old, schema_for(schemas, obj), top=True)
        out.append(new)
    return out


def recorded(applied_objects: list[Obj], schemas: list[Obj], lives: list[Any]) -> list[Obj]:
    """``applied_objects`` with each observed field they do not set recorded from what the
    cluster answered (``lives``, in the same order): Krake's ``last_applied_manifest``."""
    out = []
    for obj, live in zip(applied_objects, lives, strict=True):
        new = copy.deepcopy(obj)
        if isinstance(live, dict):
            _keep_dict(new, live, schema_for(schemas, obj), top=True)
        out.append(new)
    return out


def _keep_dict(target: dict[str, Any], source: Any, schema: dict[str, Any], *,
               top: bool = False, meta: bool = False) -> None:  # fmt: skip
    """Add to ``target`` the observed fields of ``source`` it does not have (in place)."""
    for key, sub in schema.items():
        if (top and key in _IDENTITY) or (top and key == "status"):
            continue
        if meta and key in _META_IDENTITY:
            continue
        value = _get(source, key)
        if value is None:
            continue
        if isinstance(sub, dict) and isinstance(value, dict):
            if key not in target:
                target[key] = {}
            if isinstance(target[key], dict):
                _keep_dict(target[key], value, sub, meta=top and key == "metadata")
        elif isinstance(sub, list) and isinstance(value, list):
            if key not in target:
                target[key] = []
            if isinstance(target[key], list):
                _keep_list(target[key], value, sub)
        elif key not in target:
            target[key] = copy.deepcopy(value)


def _keep_list(target: list[Any], source: list[Any], schema: list[Any]) -> None:
    for index, sub in enumerate(schema[:-1]):
        if index >= len(source):
            return
        value = source[index]
        if index >= len(target):
            if isinstance(sub, dict) and isinstance(value, dict):
                target.append({})
            elif isinstance(sub, list) and isinstance(value, list):
                target.append([])
            else:
                target.append(copy.deepcopy(value))
                continue
        if isinstance(sub, dict) and isinstance(value, dict) and isinstance(target[index], dict):
            _keep_dict(target[index], value, sub)
        elif isinstance(sub, list) and isinstance(value, list) and isinstance(target[index], list):
            _keep_list(target[index], value, sub)


# validation --------------------------------------------------------------------------


def problems(entries: Any, manifest: list[Any], path: str) -> Iterator[tuple[str, str]]:
    """What is wrong with a ``spec.observer_schema``: (field, reason) pairs.

    ``manifest`` empty (the application is given as TOSCA or CSAR) leaves out the
    check that each entry names an object of the manifest.
    """
    if not isinstance(entries, list):
        yield path, "must be a list of objects"
        return
    for index, entry in enumerate(entries):
        where = join(path, index)
        if not isinstance(entry, dict):
            yield where, "must be an object"
            continue
        found = list(_entry_problems(entry, where))
        yield from found
        if not found and manifest and find(manifest, entry) is None:
            name = entry["metadata"]["name"]
            yield where, (f"observes {entry['kind']} {name!r} ({entry['apiVersion']}), "
                          "which spec.manifest does not have")  # fmt: skip


def _entry_problems(entry: dict[str, Any], where: str) -> Iterator[tuple[str, str]]:
    for key in _IDENTITY:
        if not isinstance(entry.get(key), str) or not entry[key]:
            yield join(where, key), "is required to name the observed object (a string)"
    metadata = entry.get("metadata")
    if not isinstance(metadata, dict):
        yield join(where, "metadata"), "must be an object naming the observed object"
        return
    if not isinstance(metadata.get("name"), str) or not metadata["name"]:
        yield join(where, "metadata.name"), "is required to name the observed object (a string)"
    rest = {k: v for k, v in entry.items() if k not in (*_IDENTITY, "metadata")}
    yield from _dict_problems({k: v for k, v in metadata.items() if k != "name"},
                              join(where, "metadata"))  # fmt: skip
    yield from _dict_problems(rest, where)


def _value_problems(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        yield from _dict_problems(value, where)
    elif isinstance(value, list):
        yield from _list_problems(value, where)
    elif value is not None:
        yield where, ("must be null: an observed field has no value in the schema (only "
                      "apiVersion, kind and metadata.name do)")  # fmt: skip


def _dict_problems(value: dict[str, Any], where: str) -> Iterator[tuple[str, str]]:
    for key, item in value.items():
        yield from _value_problems(item, join(where, key) if _plain(key) else f"{where}[{key!r}]")


def _plain(key: str) -> bool:
    return re.fullmatch(r"[A-Za-z_$][\w$-]*", key) is not None


def _list_problems(value: list[Any], where: str) -> Iterator[tuple[str, str]]:
    control = value[-1] if value else None
    if not isinstance(control, dict) or set(control) != {MIN_LENGTH, MAX_LENGTH}:
        yield where, (f"must end with the list control dict {{{MIN_LENGTH}, {MAX_LENGTH}}} "
                      "(and nothing else in it)")  # fmt: skip
        return
    low, high = control[MIN_LENGTH], control[MAX_LENGTH]
    control_at = join(where, len(value) - 1)
    bad = False
    for name, number in ((MIN_LENGTH, low), (MAX_LENGTH, high)):
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            yield join(control_at, name), "must be an integer of 0 or more"
            bad = True
    if not bad and high != 0:
        if high < low:
            yield join(control_at, MAX_LENGTH), (
                f"must be at least {MIN_LENGTH} ({low}), or 0 for no maximum")
        elif high < len(value) - 1:
            yield join(control_at, MAX_LENGTH), (
                f"must be at least the number of observed elements ({len(value) - 1}), "
                "or 0 for no maximum")  # fmt: skip
    for index, item in enumerate(value[:-1]):
        yield from _value_problems(item, join(where, index))
