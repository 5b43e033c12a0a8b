"""The lean schema of ``POST /core/events`` accepts nothing the Event model refuses, and
what both accept gives the same items (the model's only adds empty metadata lists)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from shoal.api.event_items import _LEAN, _ordered, items_of
from shoal.model.events import EventBatch

EVENT: dict[str, Any] = {
    "api": "core",
    "kind": "Event",
    "metadata": {"name": "web-50df7af40444bd0f", "namespace": "default"},
    "involved_object": {
        "api": "kubernetes", "kind": "Application", "namespace": "default", "name": "web",
        "uid": "u1",
    },
    "reason": "Scheduled",
    "message": "Scheduled to c1 (score 0.5)",
    "reporting_component": "scheduler",
    "type": "Normal",
    "count": 2,
    "first_timestamp": "2026-11-23T16:22:00.123456+00:00",
    "last_timestamp": "2026-11-23T16:22:00.5Z",
    "expires": "2026-11-23T18:22:00.5+01:00",
}  # fmt: skip


def _body(event: dict[str, Any]) -> bytes:
    return orjson.dumps({"events": [event]})


def _lean(event: dict[str, Any]) -> bool:
    try:
        return _ordered(_LEAN.validate_json(_body(event))["events"])
    except ValidationError:
        return False


def _model(event: dict[str, Any]) -> bool:
    try:
        EventBatch.model_validate_json(_body(event))
        return True
    except ValidationError:
        return False


def test_a_recorder_item_reads_the_same_both_ways() -> None:
    lean = _LEAN.validate_json(_body(EVENT))["events"][0]
    model = items_of(EventBatch.model_validate_json(_body(EVENT)))[0]
    assert model["metadata"] == {**lean["metadata"], "labels": {}, "finalizers": [], "owners": []}
    assert {k: v for k, v in model.items() if k != "metadata"} == {
        k: v for k, v in lean.items() if k != "metadata"
    }


EDITS: dict[str, Callable[[dict[str, Any]], object]] = {
    "unknown field": lambda e: e.update(bogus=1),
    "labels": lambda e: e["metadata"].update(labels={"tier": "gold"}),
    "bad label": lambda e: e["metadata"].update(labels={"a b": "c"}),
    "stored field": lambda e: e["metadata"].update(uid="x"),
    "naive moment": lambda e: e.update(first_timestamp="2026-11-23T16:22:00"),
    "number moment": lambda e: e.update(expires=0),
    "date only": lambda e: e.update(expires="2026-11-23"),
    "bad month": lambda e: e.update(expires="2026-13-23T00:00:00Z"),
    "count as text": lambda e: e.update(count="1"),
    "count as bool": lambda e: e.update(count=True),
    "count 0": lambda e: e.update(count=0),
    "upper-case name": lambda e: e["metadata"].update(name="Web"),
    "long name": lambda e: e["metadata"].update(name="a" * 64),
    "name ends in a dash": lambda e: e["metadata"].update(name="web-"),
    "first after last": lambda e: e.update(first_timestamp="2026-11-24T16:22:00Z"),
    "no message": lambda e: e.pop("message"),
    "reason not CamelCase": lambda e: e.update(reason="not scheduled"),
    "unknown type": lambda e: e.update(type="Error"),
    "other api": lambda e: e.update(api="kubernetes"),
    "empty involved name": lambda e: e["involved_object"].update(name=""),
    "namespace a number": lambda e: e["metadata"].update(namespace=3),
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_the_lean_schema_accepts_no_more_than_the_model(
    edit: Callable[[dict[str, Any]], object],
) -> None:
    event = copy.deepcopy(EVENT)
    edit(event)
    assert not _lean(event) or _model(event)
