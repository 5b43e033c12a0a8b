"""Observer schemas, table by table: default schema, observation, change, apply, validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shoal.model import observer_schema as rules

CONTROL_1 = {rules.MIN_LENGTH: 1, rules.MAX_LENGTH: 1}

ECHO: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "echo-demo"},
    "spec": {
        "selector": {"matchLabels": {"app": "echo"}},
        "template": {
            "metadata": {"labels": {"app": "echo"}},
            "spec": {
                "containers": [
                    {"name": "echo", "image": "echoserver:1.10",
                     "ports": [{"containerPort": 8080}]},
                ]
            },
        },
    },
}  # fmt: skip

# what Krake's default schema for ECHO is (its echo-demo-observer-schema-standard)
ECHO_DEFAULT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "echo-demo"},
    "spec": {
        "selector": {"matchLabels": {"app": None}},
        "template": {
            "metadata": {"labels": {"app": None}},
            "spec": {
                "containers": [
                    {"name": None, "image": None, "ports": [{"containerPort": None}, CONTROL_1]},
                    CONTROL_1,
                ]
            },
        },
    },
}

# replicas observed though the manifest does not set them; the image not observed
ECHO_CUSTOM: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "echo-demo", "namespace": None},
    "spec": {
        "replicas": None,
        "template": {"spec": {"containers": [{"name": None}, CONTROL_1]}},
    },
}

SERVICE_LB: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"type": "LoadBalancer", "ports": [], "selector": {"app": "web"}},
}


def _live(**changes: Any) -> dict[str, Any]:
    """ECHO as a cluster holds it (defaults filled in), with ``changes`` made."""
    live = copy.deepcopy(ECHO)
    live["metadata"].update(namespace="default", uid="u1", resourceVersion="7")
    live["spec"]["replicas"] = 1
    container = live["spec"]["template"]["spec"]["containers"][0]
    container["imagePullPolicy"] = "IfNotPresent"
    live["status"] = {"replicas": 1, "readyReplicas": 1}
    for path, value in changes.items():
        where: Any = live
        *head, last = path.split("__")
        for part in head:
            where = where[int(part)] if part.isdigit() else where[part]
        if last.isdigit() and int(last) == len(where):
            where.append(value)
        elif last.isdigit():
            where[int(last)] = value
        else:
            where[last] = value
    return live


# the default schema -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "schema"),
    [
        (ECHO, ECHO_DEFAULT),
        (
            SERVICE_LB,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": None},
                "spec": {"type": None, "ports": [{rules.MIN_LENGTH: 0, rules.MAX_LENGTH: 0}],
                         "selector": {"app": None}},
                "status": {"load_balancer": {"ingress": None}},
            },
        ),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
             "data": {"a": "1"}, "binaryData": None},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
             "data": {"a": None}, "binaryData": None},
        ),
        (
            {"apiVersion": "x/v1", "kind": "Grid", "metadata": {"name": "g"},
             "rows": [[1, 2], []]},
            {"apiVersion": "x/v1", "kind": "Grid", "metadata": {"name": "g"},
             "rows": [[None, None, {rules.MIN_LENGTH: 2, rules.MAX_LENGTH: 2}],
                      [{rules.MIN_LENGTH: 0, rules.MAX_LENGTH: 0}],
                      {rules.MIN_LENGTH: 2, rules.MAX_LENGTH: 2}]},
        ),
    ],
    ids=["deployment", "load-balancer", "config-map", "nested-lists"],
)  # fmt: skip
def test_the_default_schema_observes_what_the_manifest_sets(
    obj: dict[str, Any], schema: dict[str, Any]
) -> None:
    assert rules.default_schema(obj) == schema
    assert list(rules.problems([schema], [obj], "spec.observer_schema")) == []


def test_a_custom_entry_replaces_the_default_of_its_object_only() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo-demo"},
               "spec": {"ports": [{"port": 80}]}}  # fmt: skip
    schemas = rules.mangled([ECHO_CUSTOM], [ECHO, service])
    assert schemas == [ECHO_CUSTOM, rules.default_schema(service)]
    assert rules.schema_for(schemas, ECHO) == ECHO_CUSTOM
    other = {**ECHO, "metadata": {"name": "other"}}
    assert rules.schema_for(schemas, other) == {**ECHO_DEFAULT, "metadata": {"name": "other"}}


# observation and change -------------------------------------------------------------


def test_observe_keeps_observed_fields_and_list_lengths() -> None:
    live = _live()
    live["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "x"})
    assert rules.observe(ECHO_CUSTOM, live) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "echo-demo", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [
                {"name": "echo"}, {rules.CURRENT_LENGTH: 2},
            ]}},
        },
    }  # fmt: skip


def test_observe_reads_snake_case_names_and_fields_the_object_lacks() -> None:
    schema = rules.default_schema(SERVICE_LB)
    live = copy.deepcopy(SERVICE_LB)
    live["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}}
    seen = rules.observe(schema, live)
    assert seen["status"] == {"load_balancer": {"ingress": [{"ip": "10.0.0.9"}]}}
    assert seen["spec"]["ports"] == [{rules.CURRENT_LENGTH: 0}]
    del live["spec"]["selector"], live["status"]
    seen = rules.observe(schema, live)
    assert seen["spec"]["selector"] is None and seen["status"] is None


PORTS_1_TO_3: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "s"},
    "spec": {"ports": [{"port": None}, {rules.MIN_LENGTH: 1, rules.MAX_LENGTH: 3}]},
}
UNLIMITED: dict[str, Any] = {
    **PORTS_1_TO_3,
    "spec": {"ports": [{"port": None}, {rules.MIN_LENGTH: 1, rules.MAX_LENGTH: 0}]},
}


def _service(*ports: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"},
            "spec": {"ports": [{"port": p, "protocol": "TCP"} for p in ports]}}  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "before", "now", "changed"),
    [
        (ECHO_CUSTOM, _live(), _live(), False),
        (ECHO_CUSTOM, _live(), _live(spec__replicas=2), True),  # observed, not in manifest
        (ECHO_DEFAULT, _live(), _live(spec__replicas=2), False),  # not observed by default
        (ECHO_CUSTOM, _live(), _live(spec__template__spec__containers__0__image="v2"), False),
        (ECHO_DEFAULT, _live(), _live(spec__template__spec__containers__0__image="v2"), True),
        (ECHO_DEFAULT, _live(), _live(status={"replicas": 0}), False),  # the cluster's
        (ECHO_DEFAULT, _live(), _live(metadata={"name": "echo-demo", "labels": {"x": "y"}}),
         False),  # a label someone adds: not observed
        (ECHO_CUSTOM, _live(), _live(metadata={"name": "echo-demo", "namespace": "other"}),
         True),
        (ECHO_CUSTOM, _live(), _live(metadata={"name": "echo-demo"}), False),  # cluster-wide
        (ECHO_DEFAULT, _live(), _live(spec__template__spec__containers__1={"name": "b"}),
         True),  # a second container: the list leaves its length 1..1
        (PORTS_1_TO_3, _service(80), _service(80, 81), False),  # within 1..3
        (PORTS_1_TO_3, _service(80), _service(80, 81, 82, 83), True),  # above 3
        (PORTS_1_TO_3, _service(80), _service(), True),  # below 1, and the element went
        (PORTS_1_TO_3, _service(80), _service(90), True),  # an observed element changed
        (PORTS_1_TO_3, _service(80, 81), _service(80, 99), False),  # second not observed
        (UNLIMITED, _service(80), _service(*range(80, 100)), False),  # max 0: no maximum
    ],
    ids=["same", "observed-replicas", "default-replicas", "custom-image", "default-image",
         "status", "added-label", "namespace", "namespace-gone", "list-too-long",
         "length-in-range", "length-above", "length-below", "element-changed",
         "element-unobserved", "no-maximum"],
)  # fmt: skip
def test_only_observed_fields_and_list_lengths_count_as_changed(
    schema: dict[str, Any], before: dict[str, Any], now: dict[str, Any], changed: bool
) -> None:
    assert rules.changed(schema, rules.observe(schema, before), rules.observe(schema, now)) is (
        changed
    )


# what is applied --------------------------------------------------------------------


def test_observed_fields_the_manifest_leaves_are_recorded_and_applied_again() -> None:
    schemas = rules.mangled([ECHO_CUSTOM], [ECHO])
    first = rules.applied([ECHO], schemas, [])
    assert first == [ECHO]
    recorded = rules.recorded(first, schemas, [_live()])
    assert recorded[0]["spec"]["replicas"] == 1  # as the cluster first set it
    assert "namespace" not in recorded[0]["metadata"]  # where it goes is never recorded
    assert "status" not in recorded[0]
    assert recorded[0]["spec"]["template"] == ECHO["spec"]["template"]  # the manifest wins
    # later applies carry it; a manifest that sets it wins over the record
    assert rules.applied([ECHO], schemas, recorded) == recorded
    scaled = copy.deepcopy(ECHO)
    scaled["spec"]["replicas"] = 3
    assert rules.applied([scaled], schemas, recorded)[0]["spec"]["replicas"] == 3


def test_the_default_schema_records_nothing_beyond_the_manifest() -> None:
    schemas = rules.mangled([], [ECHO])
    assert rules.recorded([ECHO], schemas, [_live()]) == [ECHO]


def test_observed_list_elements_the_manifest_lacks_are_recorded() -> None:
    service = _service(80)
    schema = {**PORTS_1_TO_3, "spec": {"ports": [
        {"port": None}, {"port": None, "protocol": None}, {rules.MIN_LENGTH: 1,
                                                           rules.MAX_LENGTH: 3}]}}  # fmt: skip
    recorded = rules.recorded([service], [schema], [_service(80, 81)])
    assert recorded[0]["spec"]["ports"] == [
        {"port": 80, "protocol": "TCP"},
        {"port": 81, "protocol": "TCP"},
    ]


# validation -------------------------------------------------------------------------

BASE = "spec.observer_schema"


def edited(path: str, value: Any, drop: bool = False) -> dict[str, Any]:
    """ECHO_CUSTOM with the value at ``path`` (dots, list indexes as numbers) changed, or
    dropped."""
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
    return entry


@pytest.mark.parametrize(
    ("entry", "field", "reason"),
    [
        (edited("apiVersion", None, drop=True), f"{BASE}[0].apiVersion", "is required"),
        (edited("kind", 3), f"{BASE}[0].kind", "is required"),
        (edited("metadata", None, drop=True), f"{BASE}[0].metadata", "must be an object"),
        (edited("metadata", {"namespace": None}), f"{BASE}[0].metadata.name", "is required"),
        (edited("spec.replicas", 1), f"{BASE}[0].spec.replicas", "must be null"),
        (edited("metadata.namespace", "default"), f"{BASE}[0].metadata.namespace",
         "must be null"),
        (edited("spec.template.spec.containers", [{"name": None}]),
         f"{BASE}[0].spec.template.spec.containers", "list control dict"),
        (edited("spec.template.spec.containers", []),
         f"{BASE}[0].spec.template.spec.containers", "list control dict"),
        (edited("spec.template.spec.containers.1", {rules.MIN_LENGTH: 1}),
         f"{BASE}[0].spec.template.spec.containers", "list control dict"),
        (edited("spec.template.spec.containers.1", {rules.MIN_LENGTH: "1", rules.MAX_LENGTH: 1}),
         f"{BASE}[0].spec.template.spec.containers[1].{rules.MIN_LENGTH}", "an integer"),
        (edited("spec.template.spec.containers.1", {rules.MIN_LENGTH: 0, rules.MAX_LENGTH: -1}),
         f"{BASE}[0].spec.template.spec.containers[1].{rules.MAX_LENGTH}", "an integer"),
        (edited("spec.template.spec.containers.1", {rules.MIN_LENGTH: 3, rules.MAX_LENGTH: 2}),
         f"{BASE}[0].spec.template.spec.containers[1].{rules.MAX_LENGTH}",
         f"at least {rules.MIN_LENGTH}"),
        (edited("spec.template.spec.containers",
               [{"name": None}, {"name": None}, {rules.MIN_LENGTH: 0, rules.MAX_LENGTH: 1}]),
         f"{BASE}[0].spec.template.spec.containers[2].{rules.MAX_LENGTH}",
         "number of observed elements"),
        (edited("spec.template.spec.containers.0", "echo"),
         f"{BASE}[0].spec.template.spec.containers[0]", "must be null"),
        (edited("metadata.name", "web"), f"{BASE}[0]", "which spec.manifest does not have"),
        ("echo-demo", f"{BASE}[0]", "must be an object"),
    ],
    ids=["no-api-version", "kind-number", "no-metadata", "no-name", "value-not-null",
         "namespace-value", "no-control", "empty-list", "control-half", "min-string",
         "max-negative", "max-below-min", "max-below-elements", "element-value",
         "not-in-manifest", "entry-string"],
)  # fmt: skip
def test_a_bad_schema_names_the_field_and_the_reason(entry: Any, field: str, reason: str) -> None:
    found = list(rules.problems([entry], [ECHO], BASE))
    assert found, "accepted"
    assert found[0][0] == field, found
    assert reason in found[0][1], found


@pytest.mark.parametrize(
    "entry",
    [
        ECHO_CUSTOM,
        ECHO_DEFAULT,
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "echo-demo"}},
        edited("spec.template.spec.containers.1", {rules.MIN_LENGTH: 5, rules.MAX_LENGTH: 0}),
    ],
    ids=["custom", "default", "identity-only", "no-maximum"],
)
def test_good_schemas_pass(entry: dict[str, Any]) -> None:
    assert list(rules.problems([entry], [ECHO], BASE)) == []


def test_without_a_manifest_only_the_form_is_checked() -> None:
    """An application given as TOSCA or CSAR has its manifest made later."""
    assert list(rules.problems([ECHO_CUSTOM], [], BASE)) == []
    assert [f for f, _ in rules.problems([edited("spec.replicas", 2)], [], BASE)] == [
        f"{BASE}[0].spec.replicas"
    ]
