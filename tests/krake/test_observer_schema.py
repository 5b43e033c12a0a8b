"""Shoal's observer schema rules agree with Krake 1.0.1's own code, case by case.

Krake's functions run unchanged in its virtualenv (``observer_probe.py``): the
default schema it generates for an object, and whether it accepts a schema.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from shoal.model import observer_schema as rules
from tests.krake.conftest import run_krake
from tests.model.test_observer_schema import ECHO, ECHO_CUSTOM, ECHO_DEFAULT, SERVICE_LB

pytestmark = [pytest.mark.integration]

OBJECTS: list[dict[str, Any]] = [
    ECHO,
    SERVICE_LB,
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}},
     "data": {"k": "v"}},
    {"apiVersion": "x/v1", "kind": "Grid", "metadata": {"name": "g"}, "rows": [[1, [2]], []]},
]  # fmt: skip


def _changed(path: str, value: Any, *, drop: bool = False) -> list[dict[str, Any]]:
    """ECHO_CUSTOM with the value at ``path`` (dots, list indexes as numbers) changed."""
    entry = copy.deepcopy(ECHO_CUSTOM)
    where: Any = entry
    *head, last = path.split(".")
    for part in head:
        where = where[int(part)] if part.isdigit() else where[part]
    key: Any = int(last) if last.isdigit() else last
    if drop:
        del where[key]
    else:
        where[key] = value
    return [entry]


CONTAINERS = "spec.template.spec.containers"
VALIDATIONS: dict[str, list[Any]] = {
    "custom": [ECHO_CUSTOM],
    "default": [ECHO_DEFAULT],
    "identity-only": [{"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "echo-demo"}}],
    "none": [],
    "value": _changed("spec.replicas", 1),
    "namespace-value": _changed("metadata.namespace", "default"),
    "no-api-version": _changed("apiVersion", None, drop=True),
    "no-kind": _changed("kind", None, drop=True),
    "no-metadata": _changed("metadata", None, drop=True),
    "no-name": _changed("metadata.name", None, drop=True),
    "no-control": _changed(CONTAINERS, [{"name": None}]),
    "control-half": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 1}),
    "min-string": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: "1", rules.MAX_LENGTH: 1}),
    "max-negative": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 0, rules.MAX_LENGTH: -1}),
    "max-below-min": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 2, rules.MAX_LENGTH: 1}),
    "no-maximum": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 5, rules.MAX_LENGTH: 0}),
    "max-below-elements": _changed(CONTAINERS, [
        {"name": None}, {"name": None}, {rules.MIN_LENGTH: 0, rules.MAX_LENGTH: 1}]),
    "element-value": _changed(f"{CONTAINERS}.0", "echo"),
    "not-in-manifest": _changed("metadata.name", "web"),
    "other-api-version": _changed("apiVersion", "apps/v1beta1"),
}  # fmt: skip


async def test_default_schemas_and_validation_agree_with_krake(krake_python: str) -> None:
    cases = {
        "defaults": OBJECTS,
        "validations": [
            {"id": name, "schema": schema, "manifest": [ECHO]}
            for name, schema in VALIDATIONS.items()
        ],
    }
    lines = await run_krake(krake_python, "observer_probe.py", json.dumps(cases))
    krake_defaults = [line["default"] for line in lines if "default" in line]
    assert krake_defaults == [rules.default_schema(obj) for obj in OBJECTS]

    krake_refuses = {line["id"]: line["refused"] is not None for line in lines if "id" in line}
    shoal_refuses = {
        name: bool(list(rules.problems(schema, [ECHO], "spec.observer_schema")))
        for name, schema in VALIDATIONS.items()
    }
    assert shoal_refuses == krake_refuses
    assert sum(krake_refuses.values()) >= 14  # the table tries refusals, not only passes
