"""Shoal's models against Krake 1.0.1's field table (``shoal.model.krake``), field by field.

For every Krake kind and every path of Krake's table: Shoal has the field, its
default is Krake's, it accepts ``null`` wherever Krake does, and it accepts
every member of Krake's enums. What Shoal does differently on purpose is listed
in ``DIFFERENCES`` with the reason (and in docs/api.md); the test fails both on a
new difference and on a listed one that went away. tests/krake/test_table.py
checks that Krake's own classes still give the committed table.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from shoal.model import krake
from shoal.model.base import Kind
from shoal.model.registry import KINDS
from shoal.model.subresources import (
    ApplicationBinding,
    ClusterBinding,
    CompleteToken,
    ShutdownToken,
)

SHOAL: dict[str, type[BaseModel]] = {
    **{kind.kind_name(): kind for kind in KINDS if kind.kind_name() in krake.FIELDS},
    "ClusterBinding": ApplicationBinding,
    "Complete": CompleteToken,
    "Shutdown": ShutdownToken,
    "CloudBinding": ClusterBinding,
}
"""Krake's kind name -> Shoal's model (a binding body keeps Krake's ``kind`` on the wire)."""

SERVER_SET = ("metadata.uid", "metadata.created", "metadata.modified")
"""None only in a body sent to Shoal: the server sets them on every write."""

_REASONS = "reason codes: the seeds' codes only (API.md); Krake's other names are a 422"
_EVERY_REASON = dict.fromkeys(
    (
        "Application:status.reason.code",
        "Cluster:status.reason.code",
        "Cluster:status.metrics_reasons{}.code",
        "Cloud:status.metrics_reasons{}.code",
        "GlobalCloud:status.metrics_reasons{}.code",
    ),
    _REASONS,
)
_NULL_CONSTRAINTS = "Shoal writes [] for no constraint (Krake writes null); it reads null as []"
DIFFERENCES: dict[str, str] = {
    **_EVERY_REASON,
    "Application:spec.constraints.cluster.labels": _NULL_CONSTRAINTS,
    "Application:spec.constraints.cluster.metrics": _NULL_CONSTRAINTS,
    "Cluster:spec.constraints.cloud.labels": _NULL_CONSTRAINTS,
    "Cluster:spec.constraints.cloud.metrics": _NULL_CONSTRAINTS,
    "Cluster:status.state": "a new cluster starts as Shoal's observer finds it, not PENDING",
    "Cloud:spec.openstack.infrastructure_provider": "optional in Shoal (null when unset)",
    "GlobalCloud:spec.openstack.infrastructure_provider": "optional in Shoal (null when unset)",
}


def _unwrap(annotation: Any) -> Any:
    """The annotation without ``Annotated`` and without ``None`` in a union."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(inner) == 1:
            return _unwrap(inner[0])
    return annotation


def field_at(model: type[BaseModel], path: str) -> FieldInfo | None:
    """Shoal's field at a path of Krake's table (``a.b[].c``, ``a{}.b``), or None."""
    *parents, last = path.split(".")
    for step in parents:
        name = step.rstrip("[]{}")
        found = model.model_fields.get(name)
        if found is None:
            return None
        annotation = _unwrap(found.annotation)
        for marker in step[len(name) :: 2]:
            annotation = _unwrap(get_args(annotation)[0 if marker == "[" else 1])
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model.model_fields.get(last)


def _adapter(field: FieldInfo) -> TypeAdapter[Any]:
    if not field.metadata:
        return TypeAdapter(field.annotation)
    return TypeAdapter(Annotated[field.annotation, *field.metadata])


def _accepts(field: FieldInfo, value: Any) -> bool:
    try:
        _adapter(field).validate_python(value)
    except ValidationError:
        return False
    return True


def _enum_values(type_: str) -> Any:
    """A value of each member of the Krake enum that ``type_`` names, shaped like the field."""
    name = type_.removeprefix("list[").removesuffix("]").removeprefix("enum:")
    for member in krake.ENUMS[name]:
        yield [member] if type_.startswith("list[") else member


def _server_set_or_section(kind: str, path: str) -> bool:
    """Set by the server on every write, or a section of a ``oneof`` that ``type`` did not pick."""
    parent = path.rpartition(".")[0]
    return path in SERVER_SET or krake.FIELDS[kind].get(parent, ("",))[0].startswith("oneof:")


def mismatch(kind: str, path: str, type_: str, default: Any) -> str | None:
    """Why Shoal's field at ``path`` of ``kind`` is not Krake's, or None when it is."""
    field = field_at(SHOAL[kind], path)
    if field is None:
        return "missing"
    if default is None and not _accepts(field, None):
        return "refuses null"
    if default is None and field.get_default(call_default_factory=True) is not None:
        return f"default {field.get_default(call_default_factory=True)!r}, Krake's is null"
    if default == krake.REQUIRED and not field.is_required() and field.get_default() is None:
        if not _server_set_or_section(kind, path):
            return "may be null, Krake's may not"
    if default not in (None, krake.REQUIRED):
        if field.is_required():
            return f"required, Krake's default is {default!r}"
        ours = field.get_default(call_default_factory=True)
        if default == krake.FROM_FIELDS:
            if not isinstance(ours, BaseModel):
                return f"default {ours!r}, Krake's is an object"
        elif _adapter(field).dump_python(ours, mode="json") != default:
            return f"default {ours!r}, Krake's is {default!r}"
    if "enum:" in type_:
        refused = [v for v in _enum_values(type_) if not _accepts(field, v)]
        if refused:
            return f"refuses {refused}"
    return None


def test_every_krake_kind_has_a_shoal_model() -> None:
    kinds = {kind for kind in krake.FIELDS if not kind.endswith("List")} - {"WatchEvent"}
    assert kinds == set(SHOAL)
    stored = {k.kind_name() for k in KINDS if issubclass(k, Kind)}
    assert {k for k, model in SHOAL.items() if issubclass(model, Kind)} <= stored


@pytest.mark.parametrize("kind", sorted(SHOAL))
def test_shoal_fields_and_defaults_are_krakes(kind: str) -> None:
    found = {}
    for path, (type_, default) in krake.FIELDS[kind].items():
        why = mismatch(kind, path, type_, default)
        if why is not None:
            found[f"{kind}:{path}"] = why
    expected = {key for key in DIFFERENCES if key.startswith(f"{kind}:")}
    assert set(found) == expected, found
