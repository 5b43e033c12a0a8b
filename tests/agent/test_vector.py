"""The numpy sampler answers as the plugin loop does: same eligible nodes, reasons and scores."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from shoal.agent.cache import NodeCache, NodeInfo
from shoal.agent.config import AgentConfig
from shoal.agent.framework import FilterPlugin, Pipeline, Reject, register
from shoal.agent.pod import Pod, PodRequest
from shoal.agent.table import Batch
from shoal.agent.vector import VectorSampler
from tests.agent.conftest import pod

Obj = dict[str, Any]


def node(i: int, rng: random.Random) -> Obj:
    labels = {} if i % 7 == 0 else {"shoal.dev/lat-long": f"{48 + rng.random():.3f}_16.37"}
    taints = [{"key": "gpu", "effect": "NoSchedule"}] if i % 10 == 3 else (
        [{"key": "soft", "effect": "PreferNoSchedule"}] if i % 10 == 4 else [])
    return {"metadata": {"name": f"n-{i}", "labels": labels},
            "spec": {"taints": taints, "unschedulable": i % 29 == 5},
            "status": {"allocatable": {"cpu": str(rng.choice([2, 4, 8])), "memory": "8Gi",
                                       "pods": "110"},
                       "conditions": [{"type": "Ready",
                                       "status": "False" if i % 31 == 6 else "True"}]}}


def busy(i: int, on: str, cpu: str) -> Obj:
    return {"metadata": {"name": f"b-{i}", "namespace": "default", "resourceVersion": str(i)},
            "spec": {"nodeName": on, "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}


@pytest.fixture
def cache() -> NodeCache:
    rng = random.Random(4)
    made = NodeCache()
    made.replace_nodes([node(i, rng) for i in range(300)])
    made.replace_pods([busy(i, f"n-{rng.randrange(300)}", rng.choice(["500m", "1", "3"]))
                       for i in range(400)], 400)
    return made


def request(body: Obj) -> PodRequest:
    return PodRequest.of(Pod.model_validate(body), "default")


def both(cache: NodeCache, body: Obj) -> tuple[Obj, Obj]:
    config = AgentConfig(cluster="c")
    pipeline = Pipeline(config)
    pod_request = request(body)
    loop = pipeline.sample(pipeline.strategies["random"], pod_request, 10_000, cache)
    vector = VectorSampler(config, cache)
    assert vector.takes("random", pod_request)
    nodes, eligible, examined, rejected = vector.sample(pod_request, loop.wanted, None)
    return ({"scores": {n["name"]: n["score"] for n in loop.nodes}, "eligible": len(loop.nodes),
             "examined": loop.examined, "rejected": loop.rejected},
            {"scores": {n["name"]: n["score"] for n in nodes}, "eligible": eligible,
             "examined": examined, "rejected": rejected})


@pytest.mark.parametrize("body", [
    pod(cpu="1", memory="2Gi"),
    pod(cpu="3500m"),
    pod(cpu="250m", labels={"shoal.dev/target-lat-long": "48.5_16.37",
                            "shoal.dev/max-distance-km": "40"}),
], ids=["plain", "big", "geo"])
def test_numpy_and_plugin_loop_agree(cache: NodeCache, body: Obj) -> None:
    loop, vector = both(cache, body)
    assert vector == loop
    assert loop["rejected"]  # the cluster has something to reject


def test_table_follows_reservations_and_nodes(cache: NodeCache) -> None:
    body = pod(cpu="2")
    both(cache, body)
    for i in range(0, 300, 3):
        cache.reserve(f"default/r-{i}", f"n-{i}", {"cpu": 1500, "pods": 1}, f"u-{i}")
    cache.set_node(node(1, random.Random(9)) | {"spec": {"unschedulable": True}})
    loop, vector = both(cache, body)
    assert vector == loop


def test_keep_answers_the_best_first(cache: NodeCache) -> None:
    pod_request = request(pod(cpu="100m"))
    nodes, eligible, examined, _ = VectorSampler(AgentConfig(cluster="c"), cache).sample(
        pod_request, 6, 3)
    assert len(nodes) == 3 and eligible == 6 and 6 <= examined <= 300
    assert [n["score"] for n in nodes] == sorted((n["score"] for n in nodes), reverse=True)


def test_a_batch_answers_as_each_pod_alone(cache: NodeCache) -> None:
    """Pods of mixed shapes in one batch (rows of one array) answer as each does alone."""
    config = AgentConfig(cluster="c")
    pipeline = Pipeline(config)
    bodies = [pod(cpu="1", memory="2Gi"), pod(cpu="3500m"), pod(cpu="250m", labels={
        "shoal.dev/target-lat-long": "48.5_16.37", "shoal.dev/max-distance-km": "40"}),
        pod(memory="7Gi"), pod(cpu="1", labels={"shoal.dev/target-lat-long": "48.2_16.37"})]
    pods = [request(body) for body in bodies]
    found = VectorSampler(config, cache).sample_many(pods, 300, None)
    for pod_request, (nodes, eligible, examined, rejected) in zip(pods, found, strict=True):
        loop = pipeline.sample(pipeline.strategies["random"], pod_request, 10_000, cache)
        assert {n["name"]: n["score"] for n in nodes} == {
            n["name"]: n["score"] for n in loop.nodes}
        assert (eligible, examined, rejected) == (len(loop.nodes), loop.examined, loop.rejected)


def test_a_batch_samples_distinct_nodes_per_pod(cache: NodeCache) -> None:
    sampler = VectorSampler(AgentConfig(cluster="c"), cache)
    pods = [request(pod(cpu=cpu)) for cpu in ("100m", "3", "7") * 20]
    for pod_request, (nodes, eligible, examined, rejected) in zip(
            pods, sampler.sample_many(pods, 6, None), strict=True):
        names = [n["name"] for n in nodes]
        assert len(set(names)) == len(names) == eligible
        assert examined == eligible + sum(rejected.values())
        if pod_request.requests["cpu"] <= 3000:
            assert eligible == 6
        assert all(n["available"]["cpu"] >= pod_request.requests["cpu"] for n in nodes)


@register("filters")
class NotOnFirstNodes(FilterPlugin):
    """A filter of a user's own carrying its numpy form, as the built-in ones do."""

    name = "test-not-on-first-nodes"

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        return "among the first nodes" if int(node.name.split("-")[1]) < 150 else None

    def vector_filter(self, batch: Batch, order: np.ndarray, reject: Reject) -> None:
        first = np.array([int(n.split("-")[1]) < 150 for n in batch.table.names], bool)
        reject(first[order], "among the first nodes")


def test_a_plugin_carrying_its_numpy_form_keeps_the_numpy_path(cache: NodeCache) -> None:
    """Which plugin has a numpy form is the plugin's own fact: no list names the built-ins."""
    plugins = AgentConfig(cluster="c").plugins.model_copy()
    plugins.filters = [*plugins.filters, NotOnFirstNodes.name]
    config = AgentConfig(cluster="c", plugins=plugins)
    vector = VectorSampler(config, cache)
    assert vector.usable and vector.without_vector_form == []
    pipeline = Pipeline(config)
    pod_request = request(pod(cpu="1"))
    loop = pipeline.sample(pipeline.strategies["random"], pod_request, 10_000, cache)
    nodes, eligible, examined, rejected = vector.sample(pod_request, loop.wanted, None)
    assert {n["name"]: n["score"] for n in nodes} == {n["name"]: n["score"] for n in loop.nodes}
    assert (eligible, examined, rejected) == (len(loop.nodes), loop.examined, loop.rejected)
    assert rejected["among the first nodes"] > 50
    assert all(int(n["name"].split("-")[1]) >= 150 for n in nodes)
