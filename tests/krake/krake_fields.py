"""Krake's field list per kind, read from Krake's own data classes; run by Krake's Python 3.8.

    python krake_fields.py            # JSON: {"fields": {kind: {path: [type, default]}}, ...}
    python krake_fields.py --python   # the same, as the module shoal/model/krake.py

A path is dotted; ``[]`` steps into list items, ``{}`` into dict values, and a
polymorphic section (``spec.openstack``) is one more step. The default is
``"<required>"`` when Krake has none, ``"<from fields>"`` for an object made of
its fields' defaults, else its JSON form (``null`` when Krake's default is None:
the only fields where Krake accepts null). This file must stay
valid Python 3.8: it runs in Krake's virtualenv.
"""

import dataclasses
import datetime
import enum
import json
import sys
import typing

from krake.data import core, infrastructure, kubernetes
from krake.data.serializable import PolymorphicContainer, Serializable

REQUIRED = "<required>"
FROM_FIELDS = "<from fields>"
KINDS = [
    (kubernetes, "Application"),
    (kubernetes, "Cluster"),
    (kubernetes, "ClusterBinding"),
    (kubernetes, "ApplicationComplete"),
    (kubernetes, "ApplicationShutdown"),
    (core, "Metric"),
    (core, "GlobalMetric"),
    (core, "MetricsProvider"),
    (core, "GlobalMetricsProvider"),
    (core, "Role"),
    (core, "RoleBinding"),
    (infrastructure, "Cloud"),
    (infrastructure, "GlobalCloud"),
    (infrastructure, "CloudBinding"),
    (infrastructure, "InfrastructureProvider"),
    (infrastructure, "GlobalInfrastructureProvider"),
]
ENUMS = {}
NATIVE = {str: "str", int: "int", float: "float", bool: "bool", dict: "dict", list: "list"}


def type_name(type_):
    if type_ in NATIVE:
        return NATIVE[type_]
    if type_ is datetime.datetime:
        return "datetime"
    if isinstance(type_, type) and issubclass(type_, enum.Enum):
        ENUMS[type_.__name__] = list(type_.__members__)
        return "enum:" + type_.__name__
    if isinstance(type_, type) and issubclass(type_, PolymorphicContainer):
        return "oneof:" + "|".join(sorted(type_.Schema._registry))
    if isinstance(type_, type) and issubclass(type_, Serializable):
        return "object"
    if hasattr(type_, "Field"):  # constraints: strings on the wire
        return "str"
    origin = getattr(type_, "__origin__", None)
    args = getattr(type_, "__args__", ())
    if origin is list:
        return "list[" + type_name(args[0]) + "]"
    if origin is dict:
        return "dict[" + type_name(args[0]) + "," + type_name(args[1]) + "]"
    if origin is typing.Union:
        return "|".join(type_name(arg) for arg in args)
    raise TypeError(f"no name for {type_!r}")


def default_of(field):
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    elif field.default is not dataclasses.MISSING:
        value = field.default
    else:
        return REQUIRED
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Serializable):
        return FROM_FIELDS
    return value


def walk(cls, prefix, out):
    """Every field of ``cls`` (and of the data classes inside it) under ``prefix``."""
    for field in dataclasses.fields(cls):
        if issubclass(cls, PolymorphicContainer) and field.name == "type":
            out[prefix + "type"] = ["str", REQUIRED]
            for name, section in sorted(cls.Schema._registry.items()):
                out[prefix + name] = ["object", REQUIRED]
                walk(section, prefix + name + ".", out)
            continue
        path = prefix + field.name
        out[path] = [type_name(field.type), default_of(field)]
        inner(field.type, path, out)


def inner(type_, path, out):
    if isinstance(type_, type) and issubclass(type_, Serializable):
        walk(type_, path + ".", out)
        return
    origin = getattr(type_, "__origin__", None)
    if origin is list:
        inner(type_.__args__[0], path + "[]", out)
    elif origin is dict:
        inner(type_.__args__[1], path + "{}", out)


def table():
    fields = {}
    for module, name in KINDS:
        cls = getattr(module, name)
        out = {}
        walk(cls, "", out)
        fields[out["kind"][1]] = out
        listed = getattr(module, name + "List", None)
        if listed is not None:
            fields[out["kind"][1] + "List"] = {
                "api": ["str", out["api"][1]],
                "kind": ["str", out["kind"][1] + "List"],
                "metadata": ["object", REQUIRED],
                "items": ["list[" + out["kind"][1] + "]", REQUIRED],
            }
    event = {}
    walk(core.WatchEvent, "", event)
    fields["WatchEvent"] = event
    return fields


HEADER = '''"""Krake %s's wire model as data: every field of every kind, its type and its default.

Generated from Krake's own data classes by ``tests/krake/krake_fields.py --python``
(under Krake's Python, ``scripts/krake-env``); do not edit by hand. A path is dotted,
``[]`` steps into list items, ``{}`` into dict values; a default is ``REQUIRED`` when
Krake has none, ``FROM_FIELDS`` for an object made of its fields' defaults, else its
JSON form (``None``: the only fields where Krake accepts null). The model tests
compare Shoal's models with this table field by field, and check that Krake's
classes still give exactly this table.
"""

from typing import Any

KRAKE_VERSION = "%s"
REQUIRED = "<required>"
FROM_FIELDS = "<from fields>"

'''


def py(value):
    """``value`` as a Python literal with double quotes."""
    if value == REQUIRED:
        return "REQUIRED"
    if value == FROM_FIELDS:
        return "FROM_FIELDS"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(py(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(py(k) + ": " + py(v) for k, v in value.items()) + "}"
    return repr(value)


def module(result):
    """The table as a Python module (one line per field, so a diff shows each change)."""
    import krake

    version = getattr(krake, "__version__", "1.0.1")
    lines = [HEADER.replace("%s", version), "ENUMS: dict[str, tuple[str, ...]] = {"]
    for name, members in sorted(result["enums"].items()):
        lines.append(f"    {py(name)}: (")
        lines.extend(f"        {py(member)}," for member in members)
        lines.append("    ),")
    lines += ["}", "", "FIELDS: dict[str, dict[str, tuple[str, Any]]] = {"]
    for kind, fields in sorted(result["fields"].items()):
        lines.append(f"    {py(kind)}: {{")
        for path, (type_, default) in sorted(fields.items()):
            lines.append(f"        {py(path)}: ({py(type_)}, {py(default)}),")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    result = {"fields": table(), "enums": ENUMS}
    if "--python" in sys.argv:
        sys.stdout.write(module(result))
    else:
        print(json.dumps(result, sort_keys=True))
