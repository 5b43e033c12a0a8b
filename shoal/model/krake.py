"""Krake's field list per kind: every path of every kind, with its type and default.

Read from ``shoal.model.krake_table``, Krake 1.0.1's data classes as data
(generated from Krake's own code by ``tests/krake/krake_fields.py``; a later
Krake version is that one table). A path is dotted; ``[]`` steps into list
items, ``{}`` into dict values, and a polymorphic section (``spec.openstack``)
is one more step. A type is ``object``, ``list[object]``,
``dict[str,object]`` or ``oneof:a|b`` (the sections) where Krake nests one of
its classes. A default is ``REQUIRED`` when Krake has none, ``FROM_FIELDS``
for an object of its fields' defaults, else its JSON form (``None``: the only
fields where Krake accepts null). The model tests compare Shoal's models with
these paths field by field.
"""

from __future__ import annotations

import re
from typing import Any

from shoal.model.krake_table import CLASSES, ENUMS, FROM_FIELDS, KINDS, KRAKE_VERSION, REQUIRED

__all__ = ["ENUMS", "FIELDS", "FROM_FIELDS", "KRAKE_VERSION", "REQUIRED"]

_NESTED = re.compile(r"^(list\[|dict\[str,)?(object|oneof):([\w.]+)\]?$")


def _plain(type_: str) -> tuple[str, str | None, str]:
    """A type as the paths show it, the class it nests (if any), and the step into it."""
    found = _NESTED.match(type_)
    if found is None:
        return type_, None, "."
    container, what, cls = found.groups()
    step = {"list[": "[].", "dict[str,": "{}."}.get(container or "", ".")
    if what == "oneof":
        sections = "|".join(sorted(name for name in CLASSES[cls] if name != "type"))
        return f"oneof:{sections}", cls, step
    return type_.replace(f":{cls}", ""), cls, step


def _flatten(cls: str, prefix: str, out: dict[str, tuple[str, Any]]) -> dict[str, tuple[str, Any]]:
    for name, (type_, default) in CLASSES[cls].items():
        path = prefix + name
        plain, nested, step = _plain(type_)
        out[path] = (plain, default)
        if nested is not None:
            _flatten(nested, path + step, out)
    return out


FIELDS: dict[str, dict[str, tuple[str, Any]]] = {
    kind: _flatten(cls, "", {}) for kind, cls in KINDS.items()
}
"""Every path of every Krake kind (and its list and the watch event): (type, default)."""
