"""The model's placement rules, case by case: replicas, room, division, weights, each
cluster's copy. Pure functions: the scheduler and the kube controller share them."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.model.placement import (
    _floor,
    copy_for,
    desired_replicas,
    divide,
    largest_room,
    pod_request,
    pods_fit,
    room,
    room_histogram,
    weight_of,
)
from shoal.model.placement_spec import ClusterWeight, Override


def _obj(kind: str, name: str = "web", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ([_obj("Deployment", replicas=3)], 3),
        ([_obj("Deployment", replicas=0)], 0),  # scaled to zero is zero, not one
        ([_obj("Deployment")], 1),  # Kubernetes' default
        ([_obj("StatefulSet", replicas=5)], 5),
        ([_obj("ReplicaSet", replicas=2)], 2),
        ([_obj("Job", parallelism=4, completions=8)], 4),  # a Job counts its parallelism
        ([_obj("Deployment", replicas=-2)], 1),  # not a count: the default
        ([_obj("Deployment", replicas=True)], 1),
        ([_obj("Deployment", replicas="3")], 1),
        ([{"kind": "Deployment", "spec": None}], 1),
        ([_obj("Service"), _obj("ConfigMap")], None),  # nothing replicated
        ([], None),
        # the first replicated object sets the application's count
        ([_obj("Service"), _obj("Deployment", replicas=7), _obj("Deployment", replicas=2)], 7),
    ],
)
def test_desired_replicas(manifest: list[dict[str, Any]], expected: int | None) -> None:
    assert desired_replicas(manifest) == expected


def test_pod_request_is_the_first_replicated_objects_pod() -> None:
    template = {"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Ki"}}},
        {"name": "b", "resources": {"requests": {"cpu": "250m"}}}]}}  # fmt: skip
    manifest = [_obj("Service"), _obj("Deployment", replicas=2, template=template)]
    assert pod_request(manifest) == {"cpu": 500, "memory": 1024, "pods": 1}
    assert pod_request([_obj("Service")]) == {"pods": 1}
    assert pod_request([_obj("Deployment", template="bad")]) == {"pods": 1}


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (1999, None, 1999),  # no rounding asked
        (1999, 1, 1000),  # rounded down, never up to 2000
        (1999, 2, 1900),
        (1999, 3, 1990),
        (999, 3, 999),  # fewer digits than kept: as it is
        (1000, 3, 1000),
        (10, 1, 10),
        (99, 1, 90),
        (5, 1, 5),
        (50, 3, 50),
        (1234, 3, 1230),
    ],
)
def test_room_is_rounded_down_to_significant_digits(
    value: int, digits: int | None, expected: int
) -> None:
    assert _floor(value, digits) == expected


def test_room_histogram_groups_alike_nodes_and_rounds_down_past_the_limit() -> None:
    histogram = room_histogram([{"cpu": 2000, "pods": 10}, {"cpu": 2000, "pods": 10},
                                {"cpu": 500, "pods": 10}, {"cpu": -5, "pods": 3},
                                {"cpu": 700}])  # fmt: skip
    assert histogram == {"resources": ["cpu", "pods"],  # a resource not reported: none
                         "nodes": [[2, 2000, 10], [1, 700, 0], [1, 500, 10], [1, 0, 3]]}
    # as many different nodes as the limit: kept exactly
    exact = room_histogram([{"cpu": 10_000 + i} for i in range(64)])
    assert len(exact["nodes"]) == 64 and exact["nodes"][-1] == [1, 10_000]
    # three digits are not enough, two are: 10 groups of 10
    two = room_histogram([{"cpu": 10_000 + 100 * i} for i in range(100)])
    assert two["nodes"] == [[10, 10_000 + 1000 * k] for k in reversed(range(10))]
    # 65 different nodes: one more than the limit, so amounts are rounded down to 3 digits
    varied = [{"cpu": 10_000 + i, "pods": 1} for i in range(65)]
    rounded = room_histogram(varied)
    assert rounded["nodes"] == [[65, 10_000, 1]]
    # too many even at one digit: the smallest groups merge, with each resource's least
    spread = [{"cpu": (i + 1) * 10 ** (i % 9), "pods": i + 1} for i in range(200)]
    merged = room_histogram(spread)
    assert len(merged["nodes"]) == 64
    assert sum(entry[0] for entry in merged["nodes"]) == 200
    assert merged["nodes"][-1][1] == 1  # the merged group has the least cpu of its nodes
    for pod in ({"cpu": 1}, {"cpu": 50, "pods": 2}, {"cpu": 3000, "pods": 1}):
        exact = sum(min(node[k] // v for k, v in pod.items()) for node in spread)
        assert pods_fit(merged, pod) <= exact  # never more than the nodes hold


@pytest.mark.parametrize(
    ("nodes", "pod", "expected"),
    [
        ([[3, 1000, 10]], {"cpu": 300}, 9),  # 3 per node, rounded down, times 3 nodes
        ([[1, 999, 10]], {"cpu": 1000}, 0),
        ([[1, 1000, 10]], {"cpu": 1000}, 1),  # exactly fits
        ([[1, 1000, 2]], {"cpu": 100, "pods": 1}, 2),  # the scarcest resource decides
        ([[1, 1000, 2]], {"cpu": 0, "pods": 1}, 2),  # a zero request is no constraint
        ([[1, 1000, 2]], {"memory": 1}, 0),  # a resource no node reports: no room
        ([[1, 1000, 2], [2, 500, 9]], {"cpu": 250}, 4 + 4),
        ([[1, 1000, 2]], {}, 0),  # nothing requested: nothing counted
    ],
)
def test_pods_fit_node_by_node(nodes: list[list[int]], pod: dict[str, int],
                               expected: int) -> None:  # fmt: skip
    assert pods_fit({"resources": ["cpu", "pods"], "nodes": nodes}, pod) == expected


def _summary(**totals: Any) -> list[dict[str, Any]]:
    return [{"name": "n-1"}, {"summary": True, **totals}]


@pytest.mark.parametrize(
    ("summary", "pod", "expected"),
    [
        ([], {"cpu": 100}, None),  # not summarised yet: not known
        ([{"name": "n-1"}], {"cpu": 100}, None),
        # from the node totals: (allocatable - requested) / request, rounded down
        (_summary(allocatable={"cpu": 1.0}), {"cpu": 300}, 3),  # 3.33: 3, never 4
        (_summary(allocatable={"cpu": 1.0}, requested={"cpu": 0.1}), {"cpu": 300}, 3),
        (_summary(allocatable={"cpu": 1.0}, requested={"cpu": 0.2}), {"cpu": 300}, 2),
        (_summary(allocatable={"cpu": 0.9}), {"cpu": 300}, 3),  # 2.9999…: exactly 3
        (_summary(allocatable={"cpu": 1.0}, requested={"cpu": 2.0}), {"cpu": 300}, 0),
        (_summary(allocatable={"cpu": 4.0, "pods": 2.0}), {"cpu": 100, "pods": 1}, 2),
        (_summary(allocatable={"memory": 10.0}), {"memory": 4}, 2),  # bytes, not milli
        (_summary(allocatable={"cpu": 2.999}), {"cpu": 1000}, 2),  # millicores exactly
        (_summary(allocatable={"cpu": 1.0}), {"cpu": 0}, None),  # nothing to count
        (_summary(allocatable={"cpu": 1.0}), {"memory": 5}, None),  # not reported
        (_summary(allocatable={"cpu": 1.0}), {"memory": 5, "cpu": 300}, 3),  # the rest counts
        # the observer's per-node room wins over the totals
        (_summary(allocatable={"cpu": 100.0},
                  room={"resources": ["cpu"], "nodes": [[2, 700]]}), {"cpu": 300}, 4),
    ],
)
def test_room_of_a_cluster(summary: list[dict[str, Any]], pod: dict[str, int],
                           expected: int | None) -> None:  # fmt: skip
    assert room(summary, pod) == expected


def test_largest_room_per_resource() -> None:
    histogram = {"resources": ["cpu", "pods"], "nodes": [[4, 500, 30], [1, 2000, 5]]}
    assert largest_room(_summary(room=histogram)) == {"cpu": 2000, "pods": 30}
    assert largest_room(_summary(room={"resources": ["cpu"], "nodes": []})) == {"cpu": 0}
    assert largest_room(_summary(allocatable={"cpu": 1.0})) is None
    assert largest_room([]) is None


@pytest.mark.parametrize(
    ("total", "weights", "caps", "expected"),
    [
        (10, [1, 1, 1], None, ([4, 3, 3], 0)),
        (4, [1, 1, 1], None, ([2, 1, 1], 0)),  # scaled down: a fresh division
        (2, [1, 1, 1], None, ([1, 1, 0], 0)),  # ties go to the earlier entry
        (7, [2, 1], None, ([5, 2], 0)),  # 4.67 / 2.33: the larger remainder gets the one left
        (5, [1, 3], None, ([1, 4], 0)),  # 1.25 / 3.75
        (9, [2, 1, 0], None, ([6, 3, 0], 0)),  # weight 0: nothing
        (0, [1, 1], None, ([0, 0], 0)),
        (10, [], None, ([], 10)),
        (1, [0], None, ([0], 1)),  # no weight anywhere: nobody holds it
        (2, [2, 1, 2], [None, 2, 0], ([1, 1, 0], 0)),  # no room: not in the division at all
        # capped at its room; what it loses goes to the others, in proportion
        (10, [1, 1], [2, None], ([2, 8], 0)),
        (10, [1, 1, 1], [2, None, None], ([2, 4, 4], 0)),
        (10, [1, 1], [2, 3], ([2, 3], 5)),  # 5 held by nobody
        (10, [1, 1], [0, None], ([0, 10], 0)),  # no room: left out
        (10, [1, 1], [0, 0], ([0, 0], 10)),
        (6, [1, 1], [3, 3], ([3, 3], 0)),  # exactly full
        (3, [1, 1, 1], [1, 1, 1], ([1, 1, 1], 0)),
        # a second round never gives a share past its room
        (12, [1, 1, 1], [1, 5, None], ([1, 5, 6], 0)),
    ],
)
def test_divide(total: int, weights: list[float], caps: list[int | None] | None,
                expected: tuple[list[int], int]) -> None:  # fmt: skip
    assert divide(total, weights, caps) == expected


def test_weight_of_a_cluster() -> None:
    rules = [ClusterWeight(clusters="location is DE", weight=3),
             ClusterWeight(clusters="location in (DE, FR)", weight=1)]  # fmt: skip
    assert weight_of("even", {}, 7) == 1.0
    assert weight_of("dynamic", {}, 7) == 7.0  # its room
    assert weight_of("dynamic", {}, None) == 1.0  # room not known: even
    assert weight_of("dynamic", {}, 0) == 0.0
    assert weight_of(rules, {"location": "DE"}, 7) == 3.0  # the first matching rule
    assert weight_of(rules, {"location": "FR"}, 7) == 1.0
    assert weight_of(rules, {"location": "US"}, 7) == 0.0  # no rule: left out


def _override(clusters: str, kind: str, name: str, merge: dict[str, Any]) -> Override:
    return Override.model_validate(
        {"clusters": clusters, "patch": {"kind": kind, "name": name, "merge": merge}})


def test_each_cluster_runs_its_share_of_each_replicated_object() -> None:
    manifest = [_obj("Deployment", replicas=10), _obj("Job", "batch", parallelism=4,
                                                      completions=8), _obj("Service")]  # fmt: skip
    first = copy_for(manifest, [6, 4], 0, {})
    second = copy_for(manifest, [6, 4], 1, {})
    assert [o["spec"].get("replicas") for o in (first[0], second[0])] == [6, 4]
    # a Job's completions follow its parallelism, in the same proportions
    assert [(o["spec"]["parallelism"], o["spec"]["completions"]) for o in (first[1], second[1])
            ] == [(2, 5), (2, 3)]  # fmt: skip
    assert first[2] == second[2] == manifest[2]  # not replicated: the same everywhere
    assert manifest[0]["spec"]["replicas"] == 10  # the application's own manifest is unchanged
    # duplicated (no shares): each cluster runs them all
    assert copy_for(manifest, [None, None], 1, {}) == manifest
    assert copy_for(manifest, [], 0, {}) == manifest
    # a share of 0 beside another: the other runs them all
    assert copy_for(manifest, [0, 4], 1, {})[0]["spec"]["replicas"] == 10
    # every share 0 (scaled to zero): 0 everywhere
    assert copy_for(manifest, [0, 0], 0, {})[0]["spec"]["replicas"] == 0
    # a Deployment without replicas counts Kubernetes' default of one
    assert copy_for([_obj("Deployment")], [1, 0], 1, {})[0]["spec"]["replicas"] == 0
    assert copy_for([{"kind": "Deployment"}], [1, 0], 0, {})[0]["spec"]["replicas"] == 1


def test_an_override_patches_only_the_object_it_names_on_the_clusters_it_selects() -> None:
    manifest = [_obj("Deployment", "web", replicas=2, paused=False),
                _obj("Deployment", "api", replicas=2, paused=False),
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"},
                 "data": {"colour": "blue"}}]  # fmt: skip
    overrides = [_override("location is DE", "Deployment", "web", {"spec": {"paused": True}}),
                 _override("location is FR", "ConfigMap", "web", {"data": {"colour": "red"}})]
    de = copy_for(manifest, [None], 0, {"location": "DE"}, overrides)
    assert de[0]["spec"] == {"replicas": 2, "paused": True}
    assert de[1]["spec"] == {"replicas": 2, "paused": False}  # api: another name
    assert de[2]["data"] == {"colour": "blue"}  # the ConfigMap web: another kind
    fr = copy_for(manifest, [None], 0, {"location": "FR"}, overrides)
    assert [fr[0]["spec"]["paused"], fr[2]["data"]["colour"]] == [False, "red"]
    assert copy_for(manifest, [None], 0, {"location": "US"}, overrides) == manifest
    assert manifest[0]["spec"]["paused"] is False  # patched on copies only
    # overrides and shares together: the share, then the patch
    both = copy_for(manifest, [1, 1], 1, {"location": "DE"}, overrides)
    assert both[0]["spec"] == {"replicas": 1, "paused": True}
