"""Selectors, patches and quantities: the pure functions under the sim API."""

from __future__ import annotations

import pytest

from shoal.machinery.patch import PatchError, json_patch, merge_patch, strategic_merge
from shoal.machinery.selectors import ConstraintError, LabelSelector
from shoal.machinery.selectors.fields import FieldSelector
from shoal.machinery.selectors.structured import matches_structured


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {"app": "db"}, True),
        ("app!=web", {}, True),
        ("tier in (a, b)", {"tier": "b"}, True),
        ("tier notin (a,b)", {"tier": "b"}, False),
        ("tier notin (a,b)", {}, True),
        ("tier", {"tier": "x"}, True),
        ("!tier", {"tier": "x"}, False),
        ("app=web,tier in (a,b),!gpu", {"app": "web", "tier": "a"}, True),
        ("app=web,tier in (a,b),!gpu", {"app": "web", "tier": "a", "gpu": "1"}, False),
    ],
)
def test_label_selector(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.parse(selector).matches(labels) is expected


def test_label_selector_errors_and_empty() -> None:
    assert LabelSelector.parse("").matches({"any": "thing"})
    with pytest.raises(ConstraintError):
        LabelSelector.parse("a=b=c")


def test_structured_selector() -> None:
    sel = {"matchLabels": {"app": "web"},
           "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]},
                                {"key": "gpu", "operator": "DoesNotExist"}]}
    assert matches_structured(sel, {"app": "web", "tier": "a"})
    assert not matches_structured(sel, {"app": "web", "tier": "b"})


def test_field_selector() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n-1"},
           "status": {"phase": "Running"}}
    selector = FieldSelector.parse("metadata.name=p,spec.nodeName!=n-2,status.phase=Running")
    assert selector.matches(pod)
    pending = FieldSelector.parse("spec.nodeName=")
    assert not pending.matches(pod)
    assert pending.matches({"metadata": {"name": "q"}, "spec": {}})


def test_merge_and_json_patch() -> None:
    doc = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert merge_patch(doc, {"a": {"b": None, "d": 3}}) == {"a": {"c": 2, "d": 3}, "l": [1, 2]}
    out = json_patch(doc, [{"op": "add", "path": "/l/-", "value": 3},
                           {"op": "replace", "path": "/a/b", "value": 5},
                           {"op": "remove", "path": "/a/c"},
                           {"op": "test", "path": "/a/b", "value": 5}])
    assert out == {"a": {"b": 5}, "l": [1, 2, 3]}
    assert doc["l"] == [1, 2]
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "test", "path": "/a/b", "value": 9}])


def test_strategic_merge_by_name() -> None:
    spec = {"containers": [{"name": "a", "image": "x:1", "env": [{"name": "K", "value": "1"}]},
                           {"name": "b", "image": "y:1"}]}
    patch = {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
             "containers": [{"name": "a", "image": "x:2", "env": [{"name": "J", "value": "2"}]},
                            {"name": "b", "$patch": "delete"}]}
    out = strategic_merge(spec, patch)
    assert out == {"containers": [{"name": "a", "image": "x:2", "env": [
        {"name": "K", "value": "1"}, {"name": "J", "value": "2"}]}]}
