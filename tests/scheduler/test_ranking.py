"""The framework's ranking, its explanation and a multi-cluster placement on clusters that
score differently: the real plugins, the real metric cache (a static provider), the planner.

Clusters that all score the same cannot tell best first from worst first, so each cluster
here has its own metric value and the tests assert which clusters win.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from shoal.model.base import Metadata
from shoal.model.constraints import MetricRef
from shoal.model.kubernetes import Application, Cluster
from shoal.model.placement import desired_replicas, pod_request
from shoal.model.scheduler_config import SchedulerConfig
from shoal.scheduler import plugins as _plugins  # noqa: F401  (registers the built-in plugins)
from shoal.scheduler import spread
from shoal.scheduler.backends import Backends, Group
from shoal.scheduler.framework import Decision, Framework
from shoal.scheduler.metrics.cache import MetricCache
from shoal.scheduler.requests import cluster_backend, request_for
from shoal.testing import builders

#: cluster → its load (0 to 10); the score is the load normalised, so "e" (9) ranks first
LOAD = {"a": 2.0, "b": 7.0, "c": 4.0, "d": 1.0, "e": 9.0, "f": 5.0, "g": 3.0}
BEST_FIRST = sorted(LOAD, key=lambda name: -LOAD[name])  # e b f c g a d


@pytest.fixture
async def metrics() -> AsyncIterator[MetricCache]:
    """The scheduler's metric cache with one static provider giving each cluster its load."""
    async with MetricCache() as cache:
        cache.set_provider(builders.provider(
            "loads", {f"load-{name}": value for name, value in LOAD.items()}))
        for name in LOAD:
            cache.set_metric(builders.metric(f"load-{name}", "loads", 0, 10))
        await cache.refresh_now()
        yield cache


def _cluster(name: str, **labels: str) -> Cluster:
    cluster = Cluster(metadata=Metadata(name=name, namespace="default", labels=labels))
    if name in LOAD:
        cluster.spec.metrics = [MetricRef(name=f"load-{name}", weight=1)]
    return cluster


def _group(metrics: MetricCache | None, clusters: Sequence[Cluster]) -> Group:
    backends = Backends(cluster_backend, metrics)
    for cluster in clusters:
        backends.set(cluster)
    return backends.group("default")


def _app(replicas: int = 6, placement: dict[str, Any] | None = None,
         labels: Sequence[str] = ()) -> Application:  # fmt: skip
    spec = {} if placement is None else {"placement": placement}
    manifest = [builders.deployment("web", "nginx:1", replicas=replicas)]
    return builders.app("web", list(labels), manifest=manifest, **spec)


def _decide(group: Group, app: Application, *, explain_all: bool = False,
            framework: Framework | None = None) -> Decision:  # fmt: skip
    framework = framework or Framework(SchedulerConfig().plugins)
    return framework.decide(request_for(app, SchedulerConfig()), group, explain_all=explain_all)


async def test_the_best_scored_cluster_is_chosen_and_ranked_first(metrics: MetricCache) -> None:
    decision = _decide(_group(metrics, [_cluster(n) for n in LOAD]), _app())
    assert decision.chosen is not None and decision.chosen.name == "e"
    assert decision.score == pytest.approx(0.9)
    assert [backend.name for backend, _ in decision.ranked()] == BEST_FIRST
    assert [round(score, 6) for _, score in decision.ranked()] == [
        LOAD[n] / 10 for n in BEST_FIRST]  # fmt: skip
    assert decision.find("a") == (decision.ranked()[5][0], pytest.approx(0.2))
    assert decision.find("nowhere") is None


async def test_the_ranking_explained_keeps_the_best_five_best_first(metrics: MetricCache) -> None:
    group = _group(metrics, [_cluster(n) for n in LOAD])
    ranking = _decide(group, _app()).ranking
    assert [entry["cluster"] for entry in ranking] == BEST_FIRST[:5]  # e b f c g, not a or d
    assert [entry["score"] for entry in ranking] == pytest.approx([0.9, 0.7, 0.5, 0.4, 0.3])
    # the metric terms go with the winner only (and the current cluster), to stay small
    assert [("metrics" in entry) for entry in ranking] == [True, False, False, False, False]
    assert ranking[0]["metrics"] == [{"name": "load-e", "value": 9.0, "normalised": 0.9,
                                      "weight": 1.0}]  # fmt: skip
    # a framework configured for three keeps three; a dry run keeps every cluster, all terms
    three = _decide(group, _app(), framework=Framework(SchedulerConfig().plugins, ranking=3))
    assert [entry["cluster"] for entry in three.ranking] == BEST_FIRST[:3]
    everything = _decide(group, _app(), explain_all=True).ranking
    assert [entry["cluster"] for entry in everything] == BEST_FIRST
    assert all("metrics" in entry for entry in everything)


async def test_a_placement_on_several_clusters_takes_the_best_scored(metrics: MetricCache) -> None:
    app = _app(6, {"clusters": 3, "replicas": "divided"})
    decision = _decide(_group(metrics, [_cluster(n) for n in LOAD]), app)
    placement = app.spec.placement
    assert placement is not None
    planned = spread.plan(placement, decision.ranked(), desired_replicas(app.spec.manifest),
                          pod_request(app.spec.manifest), [], decision.find)  # fmt: skip
    assert planned.clusters == [("e", 2), ("b", 2), ("f", 2)]
    assert [pick.explain(None)["score"] for pick in planned.picks] == [0.9, 0.7, 0.5]
    # duplicated: the two best each run all six
    two = _app(6, {"clusters": 2})
    assert two.spec.placement is not None
    planned = spread.plan(two.spec.placement, decision.ranked(), 6, {}, [], decision.find)
    assert planned.clusters == [("e", None), ("b", None)]


async def test_clusters_with_metrics_are_preferred_to_those_without(metrics: MetricCache) -> None:
    group = _group(metrics, [_cluster("plain"), _cluster("d"), _cluster("bare")])
    decision = _decide(group, _app())
    assert decision.chosen is not None and decision.chosen.name == "d"
    assert [(r.reason, r.count, r.names) for r in decision.rejections] == [
        ("without metrics", 2, ["bare", "plain"])]  # fmt: skip
    # available: the clusters that passed the filters; preferring narrows the ranking only
    assert decision.summary == "3/3 clusters available: 2 without metrics"
    assert [backend.name for backend, _ in decision.ranked()] == ["d"]
    # without any metrics every cluster scores 0 and ties: one of them is chosen
    plain = _decide(_group(None, [_cluster("x"), _cluster("y")]), _app())
    assert {b.name for b in plain.ties} == {"x", "y"} and plain.score == 0.0


def test_a_cluster_failing_two_filters_is_counted_once() -> None:
    group = _group(None, [_cluster("x", zone="north"), _cluster("y", zone="south", tier="gold"),
                          _cluster("z", zone="south", tier="gold")])  # fmt: skip
    # x fails both constraints, y and z pass them
    decision = _decide(group, _app(labels=["zone is south", "tier is gold"]))
    assert [(r.reason, r.count, r.names) for r in decision.rejections] == [
        ("label zone is south", 1, ["x"])]  # fmt: skip
    assert decision.available == 2
    assert decision.summary == "2/3 clusters available: 1 label zone is south"
    # nothing fits: each cluster is counted by the first filter that drops it
    none = _decide(group, _app(labels=["zone is north", "tier is gold"]))
    assert [(r.reason, r.count, r.names) for r in none.rejections] == [
        ("label zone is north", 2, ["y", "z"]), ("label tier is gold", 1, ["x"])]  # fmt: skip
    assert none.chosen is None and none.available == 0
    assert none.summary == "0/3 clusters available: 2 label zone is north, 1 label tier is gold"
    explained = none.explanation()
    assert explained["rejected"] == [
        {"reason": "label zone is north", "count": 2, "clusters": ["y", "z"]},
        {"reason": "label tier is gold", "count": 1, "clusters": ["x"]}]  # fmt: skip
    assert explained["chosen"] is None and explained["clusters_total"] == 3


def test_rejected_names_are_cut_at_twenty_except_in_a_dry_run() -> None:
    """A scheduling pass names at most ``explain_names`` (20) rejected clusters per reason,
    since its explanation goes into the application's status; a dry run names them all."""
    names = [f"c{i:02}" for i in range(25)]
    group = _group(None, [_cluster(n, zone="south") for n in names] + [_cluster("n", zone="north")])
    app = _app(labels=["zone is north"])
    routine = _decide(group, app)
    [rejection] = routine.rejections
    assert rejection.count == 25 and rejection.names == names[:20]
    dry = _decide(group, app, explain_all=True)
    [rejection] = dry.rejections
    assert rejection.count == 25 and rejection.names == names
    assert dry.explanation()["rejected"][0]["clusters"] == names
    assert SchedulerConfig().explain_names == 20
    # a scheduling pass is not a dry run unless it says so
    [rejection] = Framework(SchedulerConfig().plugins).decide(
        request_for(app, SchedulerConfig()), group).rejections
    assert rejection.names == names[:20]
    # the configured number is the one kept
    five = _decide(group, app, framework=Framework(SchedulerConfig().plugins, explain_names=5))
    assert five.rejections[0].names == names[:5]


def test_no_cluster_in_the_namespace_says_so() -> None:
    decision = _decide(_group(None, []), _app())
    assert decision.chosen is None and decision.total == 0
    decision.namespace = "team-a"
    assert decision.summary == ("no clusters in namespace 'team-a' (clusters are per namespace: "
                                "register one in 'team-a')")  # fmt: skip


def test_ties_keep_the_groups_order() -> None:
    """Clusters of equal score rank in the group's order (by name), however many tie."""
    names = [f"c{i:02}" for i in range(30)]
    load = {name: float(i % 3) for i, name in enumerate(names)}  # three scores, ten each
    group = _group(None, [_cluster(n) for n in names])
    for backend in group.backends:  # scores as the metrics plugin would sum them
        backend.num, backend.den = load[backend.name], 1.0
    decision = _decide(Group(group.backends), _app())
    expected = sorted(names, key=lambda n: -load[n])  # sorted() is stable: name order kept
    assert [backend.name for backend, _ in decision.ranked()] == expected
    explained = _decide(Group(group.backends), _app(), explain_all=True).ranking
    assert [entry["cluster"] for entry in explained] == expected
    # every cluster tied for the best gets its metric terms explained
    assert [("metrics" in entry) for entry in decision.ranking] == [True] * 5


def test_no_cluster_left_ranks_nothing() -> None:
    decision = _decide(_group(None, [_cluster("x", zone="a")]), _app(labels=["zone is b"]))
    assert decision.ranked() == [] and decision.find("x") is None
    assert decision.explanation() == {
        "summary": "0/1 clusters available: 1 label zone is b", "chosen": None, "score": None,
        "rejected": [{"reason": "label zone is b", "count": 1, "clusters": ["x"]}],
        "ranking": [], "clusters": {}, "clusters_total": 1}  # fmt: skip


async def test_the_explanation_of_a_choice(metrics: MetricCache) -> None:
    group = _group(metrics, [_cluster("a"), _cluster("d")])
    decision = _decide(group, _app())
    decision.revisions = {"a": "11", "d": "12"}
    explained = decision.explanation()
    assert explained == {
        "summary": "2/2 clusters available", "chosen": "a", "score": pytest.approx(0.2),
        "rejected": [], "ranking": decision.ranking, "clusters": {"a": "11", "d": "12"},
        "clusters_total": 2}  # fmt: skip
    assert [entry["cluster"] for entry in explained["ranking"]] == ["a", "d"]


async def test_the_current_cluster_is_explained_with_its_stickiness(metrics: MetricCache) -> None:
    group = _group(metrics, [_cluster(n) for n in ("a", "b", "c")])
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "c"}
    app = Application.model_validate({**_app().model_dump(), "status": {"scheduled_to": ref}})
    ranking = _decide(group, app).ranking
    by_name = {entry["cluster"]: entry for entry in ranking}
    # c scores 0.4 + its stickiness (1.0 at weight 0.1): (0.4 + 0.1) / 1.1
    assert by_name["c"]["stickiness"] == {"value": 1.0, "weight": 0.1}
    assert by_name["c"]["score"] == pytest.approx(0.5 / 1.1)
    assert "metrics" in by_name["c"]  # the current cluster's terms are explained too
    assert "stickiness" not in by_name["b"] and "stickiness" not in by_name["a"]
    assert "metrics" not in by_name["a"]
    # a forced pass (not sticky): no stickiness anywhere
    forced = Framework(SchedulerConfig().plugins).decide(
        request_for(app, SchedulerConfig(), sticky=False), group)
    assert all("stickiness" not in entry for entry in forced.ranking)


async def test_a_metric_not_fetched_yet_is_named_in_the_ranking(metrics: MetricCache) -> None:
    metrics.set_metric(builders.metric("later", "loads", 0, 10, key="not-there-yet"))
    waiting = _cluster("waiting")
    waiting.spec.metrics = [MetricRef(name="later", weight=1)]
    decision = _decide(_group(metrics, [waiting, _cluster("plain")]), _app())
    by_name = {entry["cluster"]: entry for entry in decision.ranking}
    # it ranks as a cluster without metrics, saying which metric and why
    assert by_name["waiting"]["failing_metrics"] == {"later": "UNREACHABLE_METRICS_PROVIDER"}
    assert "failing_metrics" not in by_name["plain"]
    assert {backend.name for backend in decision.ties} == {"plain", "waiting"}


def test_a_cluster_not_online_is_rejected_as_such() -> None:
    from shoal.model.kubernetes import ClusterState

    offline = _cluster("down")
    offline.status.state = ClusterState.OFFLINE
    decision = _decide(_group(None, [offline, _cluster("up")]), _app())
    assert [(r.reason, r.count, r.names) for r in decision.rejections] == [
        ("not ONLINE", 1, ["down"])]  # fmt: skip
    assert decision.chosen is not None and decision.chosen.name == "up"
    assert decision.summary == "1/2 clusters available: 1 not ONLINE"


async def test_failing_metrics_and_missing_custom_resources_are_rejected(
    metrics: MetricCache,
) -> None:
    broken = _cluster("broken")
    broken.spec.metrics = [MetricRef(name="no-such-metric", weight=1)]
    crd = _cluster("crd")
    crd.spec.custom_resources = ["gadgets.example.com"]
    group = _group(metrics, [broken, crd, _cluster("plain")])
    decision = _decide(group, _app())
    assert [(r.reason, r.count, r.names) for r in decision.rejections] == [
        ("failing metrics", 1, ["broken"])]  # fmt: skip
    app = _app()
    app.spec.constraints.cluster.custom_resources = ["gadgets.example.com"]
    needs = _decide(group, app)
    assert [(r.reason, r.count, r.names) for r in needs.rejections] == [
        ("failing metrics", 1, ["broken"]),
        ("custom resource gadgets.example.com", 1, ["plain"])]  # fmt: skip
    assert needs.chosen is not None and needs.chosen.name == "crd"


def test_without_metrics_the_current_cluster_scores_its_stickiness() -> None:
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "y"}
    app = Application.model_validate({**_app().model_dump(), "status": {"scheduled_to": ref}})
    decision = _decide(_group(None, [_cluster("x"), _cluster("y")]), app)
    # no metrics: the stickiness term alone (0.1), not its weighted average (1.0)
    assert decision.chosen is not None and decision.chosen.name == "y"
    assert decision.score == pytest.approx(0.1)
    assert [(b.name, s) for b, s in decision.ranked()] == [("y", pytest.approx(0.1)),
                                                            ("x", 0.0)]  # fmt: skip
