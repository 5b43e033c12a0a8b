"""Which clusters an application with ``spec.placement`` gets, and each one's share."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.model.base import Metadata
from shoal.model.kubernetes import Cluster
from shoal.model.placement import copy_for, desired_replicas, divide, room
from shoal.model.placement_spec import Placement
from shoal.scheduler.backends import Backend
from shoal.scheduler.requests import cluster_backend
from shoal.scheduler.spread import plan, short_of


def _cluster(name: str, pods: int | None = None, **labels: str) -> tuple[Backend, float]:
    cluster = Cluster(metadata=Metadata(name=name, namespace="default", labels=labels))
    if pods is not None:  # the observer's node totals: room for ``pods`` pods
        cluster.status.node_summary = [
            {"summary": True, "allocatable": {"cpu": 100.0, "pods": float(pods)}}
        ]
    return cluster_backend(cluster), 0.0


def _placement(**fields: Any) -> Placement:
    return Placement.model_validate(fields)


def test_even_shares_differ_by_at_most_one() -> None:
    assert divide(10, [1, 1, 1]) == ([4, 3, 3], 0)
    assert divide(7, [2, 1]) == ([5, 2], 0)  # static weights 2:1, largest remainder
    ranked = [_cluster(n) for n in ("a", "b", "c", "d")]
    result = plan(_placement(clusters=3, replicas="divided"), ranked, 10, {"pods": 1})
    assert result.clusters == [("a", 4), ("b", 3), ("c", 3)]


def test_spread_by_picks_distinct_label_values_best_first() -> None:
    ranked = [_cluster("de-1", location="DE"), _cluster("de-2", location="DE"),
              _cluster("fr-1", location="FR")]  # fmt: skip
    placement = _placement(clusters=2, spread_by="location", replicas="divided")
    assert plan(placement, ranked, 10, {"pods": 1}).clusters == [("de-1", 5), ("fr-1", 5)]


def test_a_cluster_gets_what_it_holds_and_the_rest_goes_to_the_others() -> None:
    ranked = [_cluster("a", pods=2), _cluster("b", pods=100)]
    result = plan(_placement(clusters=2, replicas="divided"), ranked, 10, {"pods": 1})
    assert result.clusters == [("a", 2), ("b", 8)] and result.missing == 0
    short = plan(_placement(clusters=2, replicas="divided"),
                 [_cluster("a", pods=2), _cluster("b", pods=3)], 10, {"pods": 1})  # fmt: skip
    assert short.missing == 5  # the application waits, saying how many are missing


def test_fallback_group_only_fills_what_the_first_cannot_hold() -> None:
    ranked = [_cluster("backup", pods=100, tier="backup"), _cluster("main", pods=6, tier="primary")]
    placement = _placement(
        clusters=1, replicas="divided", fallback=["tier is primary", "tier is backup"]
    )
    assert plan(placement, ranked, 4, {"pods": 1}).clusters == [("main", 4)]
    assert plan(placement, ranked, 10, {"pods": 1}).clusters == [("main", 6), ("backup", 4)]
    assert plan(placement, ranked[:1], 10, {"pods": 1}).clusters == [("backup", 10)]


def test_only_a_lost_share_moves() -> None:
    current = [("a", 4), ("b", 3), ("c", 3)]
    ranked = [_cluster(n) for n in ("d", "a", "c")]  # b is gone; d scores best
    result = plan(_placement(clusters=3, replicas="divided"), ranked, 10, {"pods": 1}, current)
    assert sorted(result.clusters) == [("a", 4), ("c", 3), ("d", 3)]
    # nothing lost: nothing changes, although d now scores better than a
    ranked = [_cluster(n) for n in ("d", "a", "b", "c")]
    kept = plan(_placement(clusters=3, replicas="divided"), ranked, 10, {"pods": 1}, current)
    assert kept.clusters == [("a", 4), ("b", 3), ("c", 3)]
    # no cluster to replace it: the lost share is spread over the others (3 = 2 + 1)
    ranked = [_cluster(n) for n in ("a", "c")]
    assert sorted(plan(_placement(clusters=3, replicas="divided"), ranked, 10, {"pods": 1},
                       current).clusters) == [("a", 6), ("c", 4)]  # fmt: skip


def test_static_weights_and_duplicated_replicas() -> None:
    ranked = [_cluster("de", location="DE"), _cluster("fr", location="FR"), _cluster("us")]
    weights = [{"clusters": "location is DE", "weight": 2}, {"clusters": "location is FR",
                                                             "weight": 1}]  # fmt: skip
    placement = _placement(clusters=3, replicas="divided", weights=weights)
    assert plan(placement, ranked, 9, {"pods": 1}).clusters == [("de", 6), ("fr", 3)]
    small = [_cluster("tiny", pods=2), *ranked[:2]]  # duplicated: each must hold them all
    assert plan(_placement(clusters=2), small, 3, {"pods": 1}).clusters == [
        ("de", None), ("fr", None)]  # fmt: skip


def test_room_from_the_observed_node_totals() -> None:
    totals = [{"summary": True, "allocatable": {"cpu": 4.0, "memory": 8.0 * 2**30, "pods": 110.0},
               "requested": {"cpu": 1.0}}]  # fmt: skip
    assert room(totals, {"cpu": 500, "pods": 1}) == 6  # (4 - 1) cores / 500m
    assert room(totals, {"memory": 2**30, "pods": 1}) == 8
    assert room([], {"pods": 1}) is None  # not observed yet: not known


def test_each_copy_divides_every_replicated_object_alike() -> None:
    manifest = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 10}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
         "spec": {"parallelism": 4, "completions": 8}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}},
    ]  # fmt: skip
    assert desired_replicas(manifest) == 10
    second = copy_for(manifest, [6, 4], 1, {})
    assert second[0]["spec"]["replicas"] == 4
    assert (second[1]["spec"]["parallelism"], second[1]["spec"]["completions"]) == (2, 3)
    assert second[2] == manifest[2]
    assert copy_for(manifest, [None, None], 0, {})[0]["spec"]["replicas"] == 10  # duplicated
    assert manifest[0]["spec"]["replicas"] == 10  # the application's manifest is untouched


def test_a_share_of_nothing_runs_nowhere_but_scaled_to_zero_stays_placed() -> None:
    ranked = [_cluster(n) for n in ("a", "b", "c")]
    placement = _placement(clusters=3, replicas="divided")
    assert plan(placement, ranked, 1, {"pods": 1}).clusters == [("a", 1)]
    assert plan(placement, ranked, 0, {"pods": 1}).clusters == [("a", 0)]
    assert plan(_placement(clusters=2), ranked, None, {"pods": 1}).clusters == [
        ("a", None), ("b", None)]  # nothing replicated (ConfigMaps): duplicated on both


def test_a_slot_left_empty_takes_back_what_the_others_carried_for_it() -> None:
    divided = _placement(clusters=2, spread_by="location", replicas="divided")
    de, fr = _cluster("de-1", pods=100, location="DE"), _cluster("fr-1", pods=100, location="FR")
    # de-1 lost with no other DE cluster: fr-1 carries its share for the empty slot
    alone = plan(divided, [fr], 10, {"pods": 1}, [("de-1", 5), ("fr-1", 5)])
    assert alone.clusters == [("fr-1", 10)]
    # de-1 back: the slot is filled again with what fr-1 carried, fr-1 keeps its own
    back = plan(divided, [de, fr], 10, {"pods": 1}, [("fr-1", 10)])
    assert sorted(back.clusters) == [("de-1", 5), ("fr-1", 5)]
    # a lost share that moved to a cluster filling its slot never moves back on its own
    de2 = _cluster("de-2", pods=100, location="DE")
    stays = plan(divided, [de, de2, fr], 10, {"pods": 1}, [("de-2", 5), ("fr-1", 5)])
    assert stays.clusters == [("de-2", 5), ("fr-1", 5)]
    # duplicated alike: the empty slot is filled, nobody's replicas move
    duplicated = _placement(clusters=2, spread_by="location")
    again = plan(duplicated, [de, fr], 10, {"pods": 1}, [("fr-1", None)])
    assert sorted(again.clusters) == [("de-1", None), ("fr-1", None)]


@pytest.mark.parametrize(
    ("fields", "clusters", "expected"),
    [
        # five asked, three clusters: says so, with the framework's account
        ({"clusters": 5}, [("a", "DE"), ("b", "FR"), ("c", "US")],
         "on 3 of 5 clusters asked for: 3/3 clusters available"),
        # a spread_by label no cluster has (a typo): only one cluster can be picked
        ({"clusters": 2, "spread_by": "regoin"}, [("a", "DE"), ("b", "FR")],
         "on 1 of 2 clusters asked for: no cluster has the spread_by label 'regoin'"),
        # fewer values of the label than slots
        ({"clusters": 3, "spread_by": "location"}, [("a", "DE"), ("b", "DE"), ("c", "FR")],
         "on 2 of 3 clusters asked for: the clusters that fit have 2 distinct values of label "
         "'location' (DE, FR); 3/3 clusters available"),
        # as many as asked: not short
        ({"clusters": 2, "spread_by": "location"}, [("a", "DE"), ("b", "FR")], None),
        # divided, fewer replicas than clusters: one cluster per replica is all it can use
        ({"clusters": 3, "replicas": "divided"}, [("a", "DE"), ("b", "FR"), ("c", "US")], None),
    ],
)  # fmt: skip
def test_a_short_placement_says_why(
    fields: dict[str, Any], clusters: list[tuple[str, str]], expected: str | None
) -> None:
    placement = _placement(**fields)
    ranked = [_cluster(name, location=location) for name, location in clusters]
    total = 2 if placement.replicas == "divided" else 6
    result = plan(placement, ranked, total, {"pods": 1})
    summary = f"{len(ranked)}/{len(ranked)} clusters available"
    everyone = [backend for backend, _ in ranked]
    assert short_of(placement, result, ranked, everyone, summary) == expected


NOW = [("a", 4), ("b", 3), ("c", 3)]  # a divided application of 10 on three clusters


@pytest.mark.parametrize(
    ("clusters", "total", "expected"),
    [
        (3, 10, [("a", 4), ("b", 3), ("c", 3)]),  # nothing changed: nothing moves
        # fewer clusters: the last one leaves, its share is carried by the clusters kept
        (2, 10, [("a", 6), ("b", 4)]),
        (1, 10, [("a", 10)]),
        # more clusters: the new one takes its fair part from the others
        (4, 10, [("a", 3), ("b", 3), ("c", 2), ("d", 2)]),
        # scaled: a fresh division, not the old shares
        (3, 4, [("a", 2), ("b", 1), ("c", 1)]),
        (3, 13, [("a", 5), ("b", 4), ("c", 4)]),
        (3, 0, [("a", 0)]),  # scaled to zero: the first keeps the objects
    ],
)
def test_a_divided_application_changed(
    clusters: int, total: int, expected: list[tuple[str, int]]
) -> None:
    ranked = [_cluster(n) for n in ("d", "a", "b", "c")]  # d scores best but is new
    placement = _placement(clusters=clusters, replicas="divided")
    result = plan(placement, ranked, total, {"pods": 1}, NOW)
    assert result.clusters == expected and result.missing == 0


def test_a_cluster_full_of_the_applications_own_pods_keeps_its_share() -> None:
    # a and b have no room left: their nodes are full of this application's five pods each
    ranked = [_cluster("a", pods=0), _cluster("b", pods=0), _cluster("c", pods=10)]
    placement = _placement(clusters=2, replicas="divided")
    now = [("a", 5), ("b", 5)]
    assert plan(placement, ranked, 10, {"pods": 1}, now).clusters == now
    # the pods the controller counts there (``own``) are their room too
    assert plan(placement, ranked, 10, {"pods": 1}, now, None, {"a": 5, "b": 5}).clusters == now
    assert plan(placement, ranked, 10, {"pods": 1}, [], None, {"a": 5, "b": 5}).clusters == now
    # another application finds no room on them
    assert plan(placement, ranked, 10, {"pods": 1}).clusters == [("c", 10)]
    # duplicated: a full cluster running all of them keeps them
    both = plan(_placement(clusters=2), ranked, 10, {"pods": 1}, [("a", None), ("c", None)])
    assert both.clusters == [("a", None), ("c", None)]
    # its own pods count once: a full cluster does not hold more than it runs
    grown = plan(placement, ranked, 14, {"pods": 1}, [], None, {"a": 5, "b": 5})
    assert grown.clusters == [("a", 5), ("b", 5)] and grown.missing == 4


def test_each_pick_explains_its_share() -> None:
    de = Cluster(metadata=Metadata(name="de", namespace="default", labels={"location": "DE"}))
    de.status.node_summary = [{"summary": True, "allocatable": {"cpu": 100.0, "pods": 0.0}}]
    ranked = [(cluster_backend(de), 0.8123456789), (_cluster("us", pods=7)[0], 0.25)]
    placement = _placement(clusters=2, replicas="divided", spread_by="location")
    result = plan(placement, ranked, 10, {"pods": 1}, [("de", 4)])
    # de is full of its own 4 pods: its room is those 4, it keeps them; us takes the rest
    assert [pick.explain("location") for pick in result.picks] == [
        {"cluster": "de", "replicas": 4, "score": 0.812346, "room": 4, "weight": 1.0,
         "group": 0, "spread": "DE", "kept": True},
        {"cluster": "us", "replicas": 6, "score": 0.25, "room": 7, "weight": 1.0,
         "group": 0, "spread": None},
    ]  # fmt: skip
    assert result.picks[1].explain(None) == {"cluster": "us", "replicas": 6, "score": 0.25,
                                             "room": 7, "weight": 1.0, "group": 0}  # fmt: skip
    duplicated = plan(_placement(clusters=1), ranked[1:], 5, {"pods": 1})
    assert duplicated.picks[0].explain(None) == {"cluster": "us", "replicas": None,
                                                 "score": 0.25, "room": 7, "weight": 1.0,
                                                 "group": 0}  # fmt: skip


def test_a_kept_cluster_keeps_what_it_had_and_a_replacement_takes_the_lost_share() -> None:
    divided = _placement(clusters=2, replicas="divided")
    ranked = [_cluster("a"), _cluster("c")]  # b, which had 4, is gone
    assert plan(divided, ranked, 10, {"pods": 1}, [("a", 6), ("b", 4)]).clusters == [
        ("a", 6), ("c", 4)]  # fmt: skip
    # a slot added next to a cluster that holds little: each keeps at most what it holds
    small = [_cluster("a"), _cluster("b", pods=2)]
    assert plan(divided, small, 10, {"pods": 1}, [("a", 10)]).clusters == [("a", 8), ("b", 2)]
    # scaled to zero and planned again: still nothing anywhere
    assert plan(divided, ranked, 0, {"pods": 1}, [("a", 0)]).clusters == [("a", 0)]


def test_a_kept_cluster_that_holds_less_than_its_share_gives_the_rest_away() -> None:
    # a runs only one of its five pods so far and has room for two more: it keeps three
    ranked = [_cluster("a", pods=2), _cluster("b", pods=0), _cluster("c", pods=1)]
    divided = _placement(clusters=2, replicas="divided")
    result = plan(divided, ranked, 10, {"pods": 1}, [("a", 5), ("b", 5)], None,
                  {"a": 1, "b": 5})  # fmt: skip
    assert result.clusters == [("a", 3), ("b", 5)] and result.missing == 2
    # another application's room: its own pods elsewhere do not count here
    alone = plan(_placement(clusters=1, replicas="divided"), [_cluster("c", pods=10)], 11,
                 {"pods": 1}, [], None, {"a": 5})  # fmt: skip
    assert alone.clusters == [("c", 10)] and alone.missing == 1


def test_what_the_picks_cannot_hold_goes_to_the_next_groups_in_order() -> None:
    fallback = ["tier is primary", "tier is backup"]
    placement = _placement(clusters=2, replicas="divided", fallback=fallback)
    ranked = [_cluster("main", pods=2, tier="primary"), _cluster("b1", pods=3, tier="backup"),
              _cluster("b2", pods=2, tier="backup"), _cluster("b3", tier="backup"),
              _cluster("other", pods=100, tier="test")]  # fmt: skip
    # main and b1 fill the two slots with 2 + 3; b2 takes 2 more, b3 (room unknown) the rest
    result = plan(placement, ranked, 10, {"pods": 1})
    assert result.clusters == [("main", 2), ("b1", 3), ("b2", 2), ("b3", 3)]
    assert result.missing == 0
    # a cluster of the first group not picked does not take what is missing
    one = _placement(clusters=1, replicas="divided", fallback=fallback)
    mains = [_cluster("m1", pods=2, tier="primary"), _cluster("m2", pods=100, tier="primary"),
             _cluster("b", pods=100, tier="backup")]  # fmt: skip
    assert plan(one, mains, 10, {"pods": 1}).clusters == [("m1", 2), ("b", 8)]
    # with spread_by, a further cluster takes a value no pick carries
    spread = _placement(clusters=1, replicas="divided", fallback=fallback, spread_by="zone")
    zoned = [_cluster("m", pods=2, tier="primary", zone="z1"),
             _cluster("bz1", pods=100, tier="backup", zone="z1"),
             _cluster("bz2", pods=100, tier="backup", zone="z2")]  # fmt: skip
    assert plan(spread, zoned, 10, {"pods": 1}).clusters == [("m", 2), ("bz2", 8)]


@pytest.mark.parametrize(
    ("fields", "clusters", "total", "expected"),
    [
        # duplicated: a cluster that holds exactly all of them takes them
        ({"clusters": 2}, [("a", 3), ("b", 2), ("c", None)], 3, [("a", None), ("c", None)]),
        # divided: a cluster with room for one takes one
        ({"clusters": 2, "replicas": "divided"}, [("a", 1), ("b", None)], 4,
         [("a", 1), ("b", 3)]),
        # dynamic weights: in proportion to the room (3:9), not even (4:4)
        ({"clusters": 2, "replicas": "divided", "weights": "dynamic"}, [("a", 3), ("b", 9)], 8,
         [("a", 2), ("b", 6)]),
    ],
)  # fmt: skip
def test_room_decides_who_takes_what(
    fields: dict[str, Any], clusters: list[tuple[str, int | None]], total: int,
    expected: list[tuple[str, int | None]],
) -> None:  # fmt: skip
    ranked = [_cluster(name, pods=pods) for name, pods in clusters]
    assert plan(_placement(**fields), ranked, total, {"pods": 1}).clusters == expected


def test_static_weights_leave_out_a_cluster_of_weight_zero() -> None:
    weights = [{"clusters": "location is DE", "weight": 1}, {"clusters": "location is FR",
                                                             "weight": 0}]  # fmt: skip
    ranked = [_cluster("fr", location="FR"), _cluster("de", location="DE"),
              _cluster("de-2", location="DE")]  # fmt: skip
    divided = _placement(clusters=2, replicas="divided", weights=weights)
    assert plan(divided, ranked, 6, {"pods": 1}).clusters == [("de", 3), ("de-2", 3)]


def test_a_cluster_in_no_fallback_group_is_never_picked() -> None:
    placement = _placement(clusters=2, fallback=["tier is primary"])
    ranked = [_cluster("test", tier="test"), _cluster("main", tier="primary")]
    assert plan(placement, ranked, 2, {"pods": 1}).clusters == [("main", None)]
    kept = plan(placement, ranked, 2, {"pods": 1}, [("test", None), ("main", None)])
    assert kept.clusters == [("main", None)]


@pytest.mark.parametrize(
    ("fields", "clusters", "total", "expected"),
    [
        # divided, one replica: one cluster is all it can use
        ({"clusters": 3, "replicas": "divided"}, [("a", "DE")], 1, None),
        # duplicated, one replica: still three clusters asked for
        ({"clusters": 3}, [("a", "DE"), ("b", "FR")], 1,
         "on 2 of 3 clusters asked for: 2/2 clusters available"),
        # as many label values as slots, yet short (b holds none): the framework's account
        ({"clusters": 2, "spread_by": "location", "replicas": "divided"},
         [("a", "DE"), ("b", "FR")], 2, None),
        # a cluster without the label counts as a value of its own, shown as such
        ({"clusters": 3, "spread_by": "location"}, [("a", "DE"), ("b", None)], 6,
         "on 2 of 3 clusters asked for: the clusters that fit have 2 distinct values of label "
         "'location' (DE, no label); 2/2 clusters available"),
    ],
)  # fmt: skip
def test_a_short_placement_counts_what_it_asked_for(
    fields: dict[str, Any], clusters: list[tuple[str, str | None]], total: int,
    expected: str | None,
) -> None:  # fmt: skip
    placement = _placement(**fields)
    ranked = [_cluster(name, **({"location": loc} if loc else {})) for name, loc in clusters]
    result = plan(placement, ranked, total, {"pods": 1})
    summary = f"{len(ranked)}/{len(ranked)} clusters available"
    everyone = [backend for backend, _ in ranked]
    assert short_of(placement, result, ranked, everyone, summary) == expected


def test_short_with_as_many_label_values_as_slots_gives_the_frameworks_account() -> None:
    placement = _placement(clusters=2, spread_by="location", replicas="divided")
    ranked = [_cluster("a", pods=5, location="DE"), _cluster("b", pods=0, location="FR")]
    result = plan(placement, ranked, 4, {"pods": 1})
    assert result.clusters == [("a", 4)]
    everyone = [backend for backend, _ in ranked]
    assert short_of(placement, result, ranked, everyone, "1/2 clusters available") == (
        "on 1 of 2 clusters asked for: 1/2 clusters available")


def test_an_application_with_no_pods_to_hold_needs_no_room() -> None:
    # clusters whose nodes are full of pods: they take no pod, but nothing needs one
    full = [_cluster("a", pods=0), _cluster("b", pods=0)]
    nothing_replicated = plan(_placement(clusters=2), full, None, {"pods": 1})
    assert nothing_replicated.clusters == [("a", None), ("b", None)]
    scaled_to_zero = plan(_placement(clusters=2, replicas="divided"), full, 0, {"pods": 1})
    assert scaled_to_zero.clusters == [("a", 0)] and scaled_to_zero.missing == 0
    # nothing to divide: weights, which share replicas, do not leave a cluster out
    weights = [{"clusters": "location is DE", "weight": 1}]
    ranked = [_cluster("fr", location="FR"), _cluster("de", location="DE")]
    weighted = _placement(clusters=2, replicas="divided", weights=weights)
    assert plan(weighted, ranked, None, {"pods": 1}).clusters == [("fr", None), ("de", None)]
    # a lone cluster scaled to zero stays, with nothing on it
    lone = _placement(clusters=1, replicas="divided")
    assert plan(lone, [_cluster("a")], 0, {"pods": 1}, [("a", 0)]).clusters == [("a", 0)]
