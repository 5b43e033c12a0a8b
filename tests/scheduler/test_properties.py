"""Properties of the framework over random fleets (no API): constraints, maximum, stickiness."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from shoal.machinery.selectors import LabelConstraint, MetricConstraint
from shoal.model.application_status import state_for
from shoal.model.base import Metadata, ReasonCode
from shoal.model.constraints import MetricRef
from shoal.model.kubernetes import Cluster, ClusterSpec, ClusterState, ClusterStatus
from shoal.model.scheduler_config import Plugins
from shoal.scheduler import plugins as _plugins  # noqa: F401  (registers built-in plugins)
from shoal.scheduler.backends import Backends
from shoal.scheduler.framework import Framework, Request
from shoal.scheduler.metrics.providers import MetricError
from shoal.scheduler.requests import cluster_backend

NS = "default"
METRICS = ("m1", "m2", "m3")
LO, HI = 0.0, 10.0


@dataclass(frozen=True)
class Value:
    value: float
    normalised: float


class Source:
    """Raw values on [0, 10]; a metric absent from the dict is unknown."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def lookup(self, name: str, namespaced: bool, namespace: str | None) -> Value | MetricError:
        if name not in self.values:
            return MetricError(ReasonCode.UNKNOWN_METRIC, name)
        v = self.values[name]
        return Value(v, (v - LO) / (HI - LO))


def make_cluster(
    i: int, labels: dict[str, str], weights: dict[str, float], state: ClusterState
) -> Cluster:
    return Cluster(
        metadata=Metadata(name=f"c{i}", namespace=NS, labels=labels),
        spec=ClusterSpec(metrics=[MetricRef(name=m, weight=w) for m, w in weights.items()]),
        status=ClusterStatus(state=state),
    )


ClusterCase = tuple[dict[str, str], dict[str, float], ClusterState]

labels_st = st.dictionaries(
    st.sampled_from(["location", "tier"]), st.sampled_from(["de", "fr", "gold"]), max_size=2
)
weights_st = st.dictionaries(
    st.sampled_from(METRICS), st.sampled_from([0.5, 1.0, 2.0, 3.0]), max_size=3
)
cluster_st = st.tuples(
    labels_st,
    weights_st,
    st.sampled_from([ClusterState.ONLINE] * 4 + [ClusterState.OFFLINE]),
)
label_constraint_st = st.sampled_from(
    [
        "location is de",
        "location != de",
        "location in (de, fr)",
        "location not in (fr)",
        "tier is gold",
        "tier != gold",
    ]
)
metric_constraint_st = st.builds(
    lambda m, op, v: f"{m} {op} {v}",
    st.sampled_from(METRICS),
    st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
    st.integers(0, 10),
)


@settings(max_examples=400, deadline=None)
@given(
    clusters=st.lists(cluster_st, min_size=1, max_size=12),
    raw=st.lists(st.integers(0, 20).map(lambda x: x / 2), min_size=3, max_size=3),
    labels=st.lists(label_constraint_st, max_size=2),
    metrics=st.lists(metric_constraint_st, max_size=2),
    current=st.one_of(st.none(), st.integers(0, 11)),
    stickiness=st.sampled_from([0.0, 0.1, 0.5]),
)
def test_choice_satisfies_constraints_and_has_max_score(
    clusters: list[ClusterCase],
    raw: list[float],
    labels: list[str],
    metrics: list[str],
    current: int | None,
    stickiness: float,
) -> None:
    values = dict(zip(METRICS, raw, strict=True))
    fleet = Backends(cluster_backend, Source(values))
    for i, (lab, weights, state) in enumerate(clusters):
        fleet.set(make_cluster(i, lab, weights, state))
    cur = (NS, f"c{current}") if current is not None and current < len(clusters) else None
    request = Request(NS, labels=labels, metrics=metrics, current=cur, stickiness=stickiness)
    decision = Framework(Plugins()).decide(request, fleet.group(NS))

    def eligible(i: int) -> bool:
        lab, weights, state = clusters[i]
        if state is not ClusterState.ONLINE:
            return False
        if not all(LabelConstraint.parse(c).matches(lab) for c in labels):
            return False
        for text in metrics:  # the raw value; a cluster without the metric fails
            parsed = MetricConstraint.parse(text)
            if parsed.metric not in weights or not parsed.matches(values[parsed.metric]):
                return False
        return True

    def score(i: int) -> float:
        weights = clusters[i][1]
        sticky = stickiness if cur is not None and cur[1] == f"c{i}" else 0.0
        num = sum(values[m] / HI * w for m, w in weights.items())
        den = sum(weights.values())
        if den == 0:
            return sticky  # without metrics, stickiness value × weight alone
        return (num + 1.0 * sticky) / (den + sticky)

    ok = [i for i in range(len(clusters)) if eligible(i)]
    if not ok:
        assert decision.chosen is None
        return
    with_metrics = [i for i in ok if clusters[i][1]]
    pool = with_metrics or ok  # clusters with metrics are preferred
    assert decision.chosen is not None
    chosen = int(decision.chosen.name[1:])
    assert chosen in pool
    best = max(score(i) for i in pool)
    assert decision.score is not None
    assert np.isclose(score(chosen), best, atol=1e-9)
    assert np.isclose(decision.score, best, atol=1e-9)
    for entry in decision.ranking:
        assert np.isclose(entry["score"], score(int(entry["cluster"][1:])), atol=1e-9)


@settings(max_examples=500, deadline=None)
@given(
    s_cur=st.floats(0, 1),
    s_other=st.floats(0, 1),
    weight=st.sampled_from([0.5, 1.0, 2.0, 5.0]),
    split=st.booleans(),
)
def test_stickiness_threshold(s_cur: float, s_other: float, weight: float, split: bool) -> None:
    threshold = (0.1 + s_cur * weight) / (0.1 + weight)
    assume(abs(s_other - threshold) > 1e-9)

    # Same total weight W on both, as one metric or as two metrics with the same value.
    def refs(prefix: str) -> dict[str, float]:
        return {f"{prefix}1": weight / 2, f"{prefix}2": weight / 2} if split else {prefix: weight}

    values = {"cur": s_cur, "cur1": s_cur, "cur2": s_cur}
    values |= {"oth": s_other, "oth1": s_other, "oth2": s_other}
    fleet = Backends(cluster_backend, Source({k: v * HI for k, v in values.items()}))
    for name, prefix in (("current", "cur"), ("other", "oth")):
        fleet.set(
            Cluster(
                metadata=Metadata(name=name, namespace=NS),
                spec=ClusterSpec(
                    metrics=[MetricRef(name=m, weight=w) for m, w in refs(prefix).items()]
                ),
            )
        )
    framework = Framework(Plugins())
    decision = framework.decide(
        Request(NS, current=(NS, "current"), stickiness=0.1), fleet.group(NS)
    )
    assert decision.chosen is not None
    moves = decision.chosen.name == "other"
    assert moves == (s_other > threshold)


def test_ties_broken_at_random() -> None:
    values = {"a": 5.0, "b": 5.0, "c": 1.0}
    fleet = Backends(cluster_backend, Source(values))
    for name in values:
        fleet.set(
            Cluster(
                metadata=Metadata(name=name, namespace=NS),
                spec=ClusterSpec(metrics=[MetricRef(name=name, weight=1)]),
            )
        )
    framework = Framework(Plugins())
    wins: dict[str, int] = {}
    for _ in range(400):
        d = framework.decide(Request(NS), fleet.group(NS))
        assert d.chosen is not None
        wins[d.chosen.name] = wins.get(d.chosen.name, 0) + 1
    assert set(wins) == {"a", "b"}
    assert min(wins.values()) > 100  # fair-ish coin: P(<100 of 400) is ~1e-24


class _Big(IntEnum):
    DELETE_NOW = 100
    LATER = 150


def test_state_for() -> None:
    assert state_for(ReasonCode.RESOURCE_NOT_FOUND).name == "PENDING"
    for code in ReasonCode:
        expected = (
            "DELETING"
            if code.value >= 100
            else "PENDING"
            if code in (ReasonCode.RESOURCE_NOT_FOUND, ReasonCode.CLUSTER_DELETED)
            else "FAILED"
        )
        assert state_for(code).name == expected
    for code in (
        ReasonCode.NO_SUITABLE_RESOURCE,
        ReasonCode.INTERNAL_ERROR,
        ReasonCode.INVALID_METRIC,
    ):
        assert state_for(code).name == "FAILED"
    for big in _Big:  # codes of 100 and more delete the resource directly
        assert state_for(big).name == "DELETING"  # type: ignore[arg-type]
