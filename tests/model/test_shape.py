"""Every field Shoal adds to a Krake kind is left out of its documents while at its default,
and the API's JSON-edit writes (``prune``) leave out exactly what the model's writes do."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

import orjson
import pytest
from pydantic import BaseModel

from shoal.api.codec import encode
from shoal.model import krake
from shoal.model.base import Kind
from shoal.model.constraints import ClusterConstraints
from shoal.model.kubernetes import Application
from shoal.model.registry import KINDS
from shoal.model.shape import AtDefault, prune
from tests.api.samples import SAMPLES

KRAKE_KINDS = [kind for kind in KINDS if kind.kind_name() in krake.FIELDS]
SHOWN_ALWAYS = {"metadata.resource_version": "the revision, for compare-and-swap"}
"""Shoal additions every document shows, and why (docs/from-krake.md)."""


def _models(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The models a field holds, with the step into each (``""``, ``[]`` or ``{}``)."""
    origin = get_origin(annotation)
    if origin is not None and hasattr(annotation, "__metadata__"):
        return _models(get_args(annotation)[0])
    if origin in (list, dict):
        step = "[]" if origin is list else "{}"
        return [(step + s, m) for s, m in _models(get_args(annotation)[-1])]
    if origin in (Union, types.UnionType):
        return [found for arg in get_args(annotation) for found in _models(arg)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    return []


def additions(model: type[BaseModel], paths: set[str], prefix: str = "") -> dict[str, Any]:
    """Shoal's fields on a Krake kind (the first step off Krake's paths): path -> field."""
    found = {}
    for name, field in model.model_fields.items():
        path = prefix + name
        if path not in paths:
            found[path] = field
            continue
        for step, inner in _models(field.annotation):
            found |= additions(inner, paths, f"{path}{step}.")
    return found


@pytest.mark.parametrize("kind", KRAKE_KINDS, ids=lambda kind: kind.kind_name())
def test_every_shoal_addition_is_left_out_at_its_default(kind: type[Kind]) -> None:
    found = additions(kind, set(krake.FIELDS[kind.kind_name()]))
    unmarked = {p for p, f in found.items() if not isinstance(f.exclude_if, AtDefault)}
    assert unmarked == set(SHOWN_ALWAYS)
    assert "spec.allowed_values" in found or kind.kind_name() not in ("Metric", "GlobalMetric")


STORED_BEFORE = {
    "status": {"state": "PENDING", "reason": None, "placements": [], "copies": [],
               "conditions": [], "scheduler_attempts": 0, "schedule_reason": None,
               "deploy_state": None, "scheduling": None, "next_retry": None},
    "spec": {"retry_limit": None, "conflict_resolution": "abort", "placement": None},
}  # fmt: skip
"""Shoal's additions as an application stored before they were left out held them."""


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: sample.kind)
def test_prune_leaves_out_what_the_model_leaves_out(sample: Any) -> None:
    kind = next(k for k in KINDS if k.kind_name() == sample.kind)
    obj = kind.model_validate(sample.body("x", "ns" if sample.namespaced else None))
    written = orjson.loads(encode(obj))
    older = orjson.loads(encode(obj))
    older["metadata"]["inherit_labels"] = False
    if sample.kind == "Application":
        for section, fields in STORED_BEFORE.items():
            older[section] = {**fields, **older.get(section, {})}
    assert prune(kind, older) == written


def test_a_polymorphic_spec_writes_only_its_section() -> None:
    from shoal.model.core import MetricsProviderSpec

    spec = MetricsProviderSpec.model_validate({"type": "static", "static": {"metrics": {}}})
    assert spec.model_dump(mode="json") == {"type": "static", "static": {"metrics": {}}}


def test_an_application_written_by_a_krake_client_stores_its_keys_only() -> None:
    app = Application.model_validate({"metadata": {"name": "a"}, "spec": {}})
    stored = orjson.loads(encode(app))
    assert "placement" not in stored["spec"] and "placements" not in stored["status"]
    assert Application.model_validate(stored).status.placements == []  # read back: defaults


@pytest.mark.parametrize(
    "written", ["location=DE", "location  is   DE", "location in (DE,FR)", "zone != 'a b'"]
)
def test_a_label_constraint_is_kept_as_written(written: str) -> None:
    constraints = ClusterConstraints.model_validate({"labels": [written], "metrics": ["load=5"]})
    assert constraints.labels == [written]
    assert constraints.metrics == ["load=5"]


def test_a_constraint_that_does_not_parse_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"labels\.0"):
        ClusterConstraints.model_validate({"labels": ["location =="]})
