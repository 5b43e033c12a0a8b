"""How many pods a cluster's nodes hold, node by node: the pure rules and the filter.

A pod fits a node when every resource it requests fits what that node has left;
a cluster holds the sum over its nodes, rounded down; the application's own pods
there count as room for it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from shoal.machinery.resources import amounts
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, Cluster
from shoal.model.placement import (
    MAX_ROOM_ENTRIES,
    largest_room,
    pods_fit,
    room,
    room_histogram,
)
from shoal.model.scheduler_config import SchedulerConfig
from shoal.observer.controller import node_room, requested_per_node, summarize_nodes
from shoal.scheduler import plugins as _plugins  # noqa: F401  (registers node-fit)
from shoal.scheduler.application import cluster_backend, pods_to_hold, request_for
from shoal.scheduler.backends import Group
from shoal.scheduler.framework import Framework
from shoal.testing import builders

GI = 2**30


def _free(cpu: str, memory: str = "32Gi", pods: int = 110) -> dict[str, int]:
    return amounts({"cpu": cpu, "memory": memory, "pods": pods})


@pytest.mark.parametrize(
    ("nodes", "pod", "expected"),
    [
        # 30 cpus on 8-cpu nodes: none, however many nodes
        ([_free("8")] * 50, {"cpu": 30_000, "pods": 1}, 0),
        # per node, rounded down: 8 / 3 = 2 per node, not 16 / 3 = 5 over the totals
        ([_free("8"), _free("8")], {"cpu": 3_000, "pods": 1}, 4),
        # the scarcest resource of each node decides for that node
        ([_free("8", "4Gi"), _free("2", "32Gi")], {"cpu": 1_000, "memory": GI, "pods": 1}, 6),
        # a node's pod slots count too
        ([_free("8", pods=3)], {"cpu": 100, "pods": 1}, 3),
        # what is left, not what is there: 7.9 cpu hold three 2.5-cpu pods, not four
        ([_free("7900m")], {"cpu": 2_500, "pods": 1}, 3),
        # a resource no node reports is no room at all
        ([_free("8")], {"cpu": 100, "nvidia.com/gpu": 1, "pods": 1}, 0),
        # no nodes that take pods: no room
        ([], {"cpu": 100, "pods": 1}, 0),
    ],
)
def test_pods_fit_node_by_node_rounded_down(
    nodes: list[dict[str, int]], pod: dict[str, int], expected: int
) -> None:
    assert pods_fit(room_histogram(nodes), pod) == expected


def test_alike_nodes_are_one_entry_and_many_different_ones_stay_bounded() -> None:
    alike = room_histogram([_free("8")] * 5000)
    assert alike["nodes"] == [[5000, 8000, 32 * GI, 110]]
    assert alike["resources"] == ["cpu", "memory", "pods"]

    # 5,000 nodes, each with a different room left: rounded down, then merged
    varied = [_free(f"{1000 + 3 * i}m", f"{1000 + 7 * i}Mi", 110 - i % 50) for i in range(5000)]
    histogram = room_histogram(varied)
    assert len(histogram["nodes"]) <= MAX_ROOM_ENTRIES
    assert sum(entry[0] for entry in histogram["nodes"]) == 5000
    # never more than the exact count: room is only rounded down
    for pod in ({"cpu": 500, "pods": 1}, {"cpu": 2_000, "memory": GI, "pods": 1}):
        exact = sum(min(n[k] // v for k, v in pod.items()) for n in varied)
        counted = pods_fit(histogram, pod)
        assert counted <= exact
        assert counted >= exact * 0.75  # and not far below it
    # the status entry stays small for a large cluster
    assert len(json.dumps(histogram)) < 4_000


def _node(name: str, cpu: str, *, ready: bool = True, cordoned: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _summary(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``status.node_summary`` as the observer writes it for these nodes and pods."""
    summary = summarize_nodes(nodes)[0]
    summary[0]["room"] = node_room(nodes, requested_per_node(pods))
    return summary


def _usage(node: str, cpu: str) -> dict[str, Any]:
    return {"node": node, "requests": amounts({"cpu": cpu, "pods": 1})}


def test_the_observer_reports_what_each_node_that_takes_pods_has_left() -> None:
    nodes = [
        _node("n-0", "8"),
        _node("n-1", "8"),
        _node("n-2", "64", ready=False),  # not Ready: takes no pod
        _node("n-3", "64", cordoned=True),  # cordoned: takes no pod
    ]
    summary = _summary(nodes, [_usage("n-0", "6"), _usage("n-1", "1500m")])
    assert summary[0]["room"]["nodes"] == [[1, 6500, 32 * GI, 109], [1, 2000, 32 * GI, 109]]
    assert room(summary, {"cpu": 2_000, "pods": 1}) == 4  # 3 on n-1, 1 on n-0
    assert room(summary, {"cpu": 7_000, "pods": 1}) == 0  # 8.5 cpus left, on no one node
    assert largest_room(summary) == {"cpu": 6500, "memory": 32 * GI, "pods": 109}


def _cluster(name: str, cpu: str, nodes: int, used: str | None = None) -> Cluster:
    cluster = Cluster(metadata=Metadata(name=name, namespace="default"))
    node_objs = [_node(f"n-{i}", cpu) for i in range(nodes)]
    pods = [_usage(f"n-{i}", used) for i in range(nodes)] if used else []
    cluster.status.node_summary = _summary(node_objs, pods)
    return cluster


def _app(cpu: str, replicas: int, placement: dict[str, Any] | None = None,
         **status: Any) -> Application:  # fmt: skip
    deployment = builders.deployment("big", "nginx:1", replicas=replicas)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": cpu}}
    spec = {} if placement is None else {"placement": placement}
    return builders.app("big", manifest=[deployment], status=status, **spec)


def _decide(application: Application, *clusters: Cluster) -> tuple[list[str], str]:
    framework = Framework(SchedulerConfig().plugins)
    group = Group([cluster_backend(c) for c in clusters])
    decision = framework.decide(request_for(application, SchedulerConfig()), group)
    alive = [group.names[int(i)] for i in np.flatnonzero(np.isfinite(decision.scores))] if (
        decision.scores is not None
    ) else []
    return alive, decision.summary


def test_a_pod_bigger_than_any_node_names_the_resource_the_request_and_the_largest_room() -> None:
    # 20 nodes of 8 cpus: 160 cpus in all, yet no node holds a pod of 30
    alive, summary = _decide(_app("30", 1), _cluster("a", "8", 20), _cluster("b", "4", 2))
    assert alive == []
    assert summary == (
        "0/2 clusters available: 2 no node has room for one pod: it requests cpu 30, "
        "the largest node has cpu 8 left"
    )


def test_a_cluster_holds_an_application_only_if_its_nodes_hold_every_replica() -> None:
    clusters = (_cluster("a", "8", 2), _cluster("b", "8", 4))
    # 3-cpu pods: a holds 2 + 2, b holds 8
    assert _decide(_app("3", 4), *clusters)[0] == ["a", "b"]
    alive, summary = _decide(_app("3", 5), *clusters)
    assert alive == ["b"]
    assert summary == "1/2 clusters available: 1 room for fewer than 5 pods"


def test_its_own_pods_count_as_room_for_it() -> None:
    # a is full: its two nodes each run a 4-cpu pod of this application
    full = _cluster("a", "4", 2, used="4")
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "a"}
    running = _app("4", 2, scheduled_to=ref)
    running.status.last_applied_manifest = running.spec.manifest
    assert pods_to_hold(running)[1:] == (2, {"a": 2})
    assert _decide(running, full)[0] == ["a"]
    assert _decide(_app("4", 2), full)[0] == []  # another application finds no room there
    # its pods now ask for more: the ones running make no room for them
    bigger = _app("5", 2, scheduled_to=ref)
    bigger.status.last_applied_manifest = running.spec.manifest
    assert pods_to_hold(bigger)[2] == {}


def test_a_divided_placement_needs_room_for_one_pod_a_duplicated_one_for_all() -> None:
    assert pods_to_hold(_app("1", 10, {"clusters": 2, "replicas": "divided"}))[1] == 1
    assert pods_to_hold(_app("1", 10, {"clusters": 2}))[1] == 10
    alive, summary = _decide(_app("30", 10, {"clusters": 2, "replicas": "divided"}),
                             _cluster("a", "8", 20))  # fmt: skip
    assert alive == [] and "it requests cpu 30, the largest node has cpu 8 left" in summary


def _rooms(name: str, *nodes: tuple[str, str, int]) -> Cluster:
    """A cluster whose observer saw nodes with (cpu, memory, pods) left."""
    cluster = Cluster(metadata=Metadata(name=name, namespace="default"))
    free = [amounts({"cpu": cpu, "memory": memory, "pods": pods}) for cpu, memory, pods in nodes]
    cluster.status.node_summary = [{"summary": True, "room": room_histogram(free)}]
    return cluster


def _sized(cpu: str, memory: str | None = None, replicas: int = 1, **status: Any) -> Application:
    """An application of ``replicas`` pods asking for ``cpu`` and ``memory`` (a size such as
    ``1 nvidia.com/gpu`` in place of a memory asks for that resource instead)."""
    application = _app(cpu, replicas, **status)
    container = application.spec.manifest[0]["spec"]["template"]["spec"]["containers"][0]
    if memory is not None:
        amount, _, resource = memory.partition(" ")
        container["resources"]["requests"][resource or "memory"] = amount
    return Application.model_validate(application.model_dump())


@pytest.mark.parametrize(
    ("cpu", "memory", "nodes", "expected"),
    [
        # two resources short: both named, with the largest node's room of each
        ("30", "100Gi", [("8", "32Gi", 10)],
         "it requests cpu 30, memory 100Gi, the largest node has cpu 8, memory 32Gi left"),
        # as much as the largest node has is not short: only the memory is
        ("8", "40Gi", [("8", "32Gi", 10)],
         "it requests memory 40Gi, the largest node has memory 32Gi left"),
        # no one resource is short, the pod fits no node all the same: all of them named
        ("4", "4Gi", [("8", "1Gi", 10), ("1", "32Gi", 10)],
         "it requests cpu 4, memory 4Gi, pods 1, the largest node has cpu 8, memory 32Gi, "
         "pods 10 left"),
        # every node full of pods: the pod count is what is short
        ("1", None, [("8", "32Gi", 0)],
         "it requests pods 1, the largest node has pods 0 left"),
        # a resource no node has: none of it left
        ("1", "1 nvidia.com/gpu", [("8", "32Gi", 10)],
         "it requests nvidia.com/gpu 1, the largest node has nvidia.com/gpu 0 left"),
    ],
)  # fmt: skip
def test_no_node_names_what_is_short(
    cpu: str, memory: str | None, nodes: list[tuple[str, str, int]], expected: str
) -> None:
    alive, summary = _decide(_sized(cpu, memory), _rooms("a", *nodes))
    assert alive == []
    assert summary == f"0/1 clusters available: 1 no node has room for one pod: {expected}"


def test_its_own_pods_count_only_as_far_as_they_go() -> None:
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "a"}
    full = _rooms("a", ("0", "32Gi", 10))  # its two pods of 1 cpu took the cpu of the node
    running = _sized("1", None, 2, scheduled_to=ref)
    running.status.last_applied_manifest = running.spec.manifest
    assert pods_to_hold(running)[1:] == (2, {"a": 2})
    assert _decide(running, full)[0] == ["a"]
    # scaled to three: its two pods make room for two, not three
    grown = _sized("1", None, 3, scheduled_to=ref)
    grown.status.last_applied_manifest = running.spec.manifest
    assert pods_to_hold(grown)[1:] == (3, {"a": 2})
    alive, summary = _decide(grown, full)
    assert alive == [] and summary == "0/1 clusters available: 1 room for fewer than 3 pods"


def test_node_fit_counts_the_pods_the_application_needs_held() -> None:
    one_pod = _rooms("one", ("2", "32Gi", 1))  # room for one pod of 1 cpu
    two_pods = _rooms("two", ("2", "32Gi", 10))
    assert _decide(_sized("1", None, 1), one_pod, two_pods)[0] == ["one", "two"]
    alive, summary = _decide(_sized("1", None, 2), one_pod, two_pods)
    assert alive == ["two"] and summary == "1/2 clusters available: 1 room for fewer than 2 pods"
    # divided: one pod's room is enough, the planner gives each cluster what it holds
    divided = _app("1", 4, {"clusters": 2, "replicas": "divided"})
    assert _decide(divided, one_pod, two_pods)[0] == ["one", "two"]
    # scaled to zero: no pod to hold, a full cluster passes
    full = _rooms("full", ("0", "32Gi", 0))
    assert _decide(_sized("1", None, 0), full)[0] == ["full"]
