"""An application on several clusters: its replicas, how they are shared, each cluster's copy.

Pure functions shared by the scheduler (how many replicas each cluster gets) and
the kube controller (the manifest each cluster is given). Replicas are those of
Deployments, StatefulSets and ReplicaSets, and a Job's ``parallelism`` and
``completions``; every other object goes to each cluster unchanged.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from shoal.machinery.patch import strategic_merge
from shoal.machinery.resources import CPU, Amounts, pod_requests
from shoal.machinery.selectors import LabelConstraint
from shoal.machinery.types import Obj
from shoal.model.placement_spec import Override

#: Kind → the spec fields that count its replicas (and their default).
REPLICA_FIELDS: dict[str, tuple[str, ...]] = {
    "Deployment": ("replicas",),
    "StatefulSet": ("replicas",),
    "ReplicaSet": ("replicas",),
    "Job": ("parallelism", "completions"),
}


def _replicated(manifest: Sequence[Obj]) -> Obj | None:
    """The first object of the manifest that has replicas: it sets the application's count."""
    return next((obj for obj in manifest if obj.get("kind") in REPLICA_FIELDS), None)


def _count(obj: Obj, field: str) -> int:
    value = (obj.get("spec") or {}).get(field, 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 1


def desired_replicas(manifest: Sequence[Obj]) -> int | None:
    """The application's replicas (its first replicated object's), None when it has none."""
    obj = _replicated(manifest)
    return None if obj is None else _count(obj, REPLICA_FIELDS[obj["kind"]][0])


def pod_request(manifest: Sequence[Obj]) -> Amounts:
    """What one pod of the application takes from a node (its first replicated object's)."""
    obj = _replicated(manifest)
    template = ((obj or {}).get("spec") or {}).get("template") or {}
    spec = template.get("spec") if isinstance(template, dict) else None
    return pod_requests(spec if isinstance(spec, dict) else {})


#: At most this many groups of nodes in a cluster's ``room`` (see ``room_histogram``).
MAX_ROOM_ENTRIES = 64


def _floor(value: int, digits: int | None) -> int:
    """``value`` rounded down to ``digits`` significant digits (None: kept as it is)."""
    if digits is None or value < 10**digits:
        return value
    step = 10 ** (len(str(value)) - digits)
    return value // step * step


def room_histogram(free: Sequence[Mapping[str, int]]) -> Obj:
    """What each node has left, grouped: ``{resources: [...], nodes: [[count, a, b, ...]]}``.

    ``free`` holds each node's allocatable minus what its pods request, as amounts
    (cpu in millicores, memory in bytes: ``shoal.machinery.resources``). Nodes that
    have the same room are one entry with their count, so a cluster of thousands of
    alike nodes stays a few entries. When more than ``MAX_ROOM_ENTRIES`` differ,
    amounts are rounded down to fewer significant digits (3, 2, then 1), and past
    that the smallest groups are merged into one with each resource's least: room is
    only ever rounded down, so a pod counted as fitting does fit.
    """
    names = sorted({name for node in free for name in node})
    vectors = [tuple(max(0, int(node.get(name, 0))) for name in names) for node in free]
    counts: dict[tuple[int, ...], int] = {}
    for digits in (None, 3, 2, 1):
        counts = {}
        for vector in vectors:
            key = tuple(_floor(v, digits) for v in vector)
            counts[key] = counts.get(key, 0) + 1
        if len(counts) <= MAX_ROOM_ENTRIES:
            break
    ordered = sorted(counts.items(), reverse=True)
    if len(ordered) > MAX_ROOM_ENTRIES:
        rest = ordered[MAX_ROOM_ENTRIES - 1 :]
        least = tuple(min(vector[i] for vector, _ in rest) for i in range(len(names)))
        ordered = [*ordered[: MAX_ROOM_ENTRIES - 1], (least, sum(c for _, c in rest))]
    return {"resources": names, "nodes": [[count, *vector] for vector, count in ordered]}


def _totals(node_summary: Sequence[Obj]) -> Obj | None:
    return next((entry for entry in node_summary if entry.get("summary")), None)


def pods_fit(histogram: Mapping[str, Any], request: Mapping[str, int]) -> int:
    """How many pods like ``request`` the nodes hold, node by node, rounded down.

    Per node, the least over the requested resources of room // request (a
    resource the node does not report is no room at all); summed over the nodes,
    as Karmada's general estimator counts.
    """
    names: list[str] = list(histogram.get("resources") or [])
    wanted: list[tuple[int, int]] = []
    for name, amount in request.items():
        if amount <= 0:
            continue
        if name not in names:
            return 0
        wanted.append((names.index(name) + 1, amount))
    total = 0
    for entry in histogram.get("nodes") or ():
        if wanted:
            total += entry[0] * min(entry[i] // amount for i, amount in wanted)
    return total


def largest_room(node_summary: Sequence[Obj]) -> dict[str, int] | None:
    """Each resource's largest room on one node of the cluster (None: not observed)."""
    totals = _totals(node_summary)
    histogram = (totals or {}).get("room")
    if not isinstance(histogram, dict):
        return None
    names = histogram.get("resources") or []
    nodes = histogram.get("nodes") or []
    return {name: max((e[i + 1] for e in nodes), default=0) for i, name in enumerate(names)}


def room(node_summary: Sequence[Obj], request: Mapping[str, int]) -> int | None:
    """How many more pods like ``request`` a cluster holds, as its observer saw its nodes.

    Counted node by node from the observer's ``room`` (``pods_fit``). A status
    without it (written by hand, or by an older observer) is counted from the node
    totals, allocatable minus requested, per resource. None when the observer has
    not summarised the cluster yet.
    """
    totals = _totals(node_summary)
    if totals is None:
        return None
    histogram = totals.get("room")
    if isinstance(histogram, dict):
        return pods_fit(histogram, request)
    allocatable: Mapping[str, float] = totals.get("allocatable") or {}
    requested: Mapping[str, float] = totals.get("requested") or {}
    fits: int | None = None
    for name, amount in request.items():
        if amount <= 0 or name not in allocatable:
            continue
        scale = 1000.0 if name == CPU else 1.0
        free = (float(allocatable[name]) - float(requested.get(name, 0.0))) * scale
        count = max(0, math.floor(free / amount + 1e-9))
        fits = count if fits is None else min(fits, count)
    return fits


def divide(
    total: int, weights: Sequence[float], room: Sequence[int | None] | None = None
) -> tuple[list[int], int]:
    """``total`` shared in proportion to ``weights``, no share above its ``room``.

    Largest remainders, ties to the earlier entry: even weights give shares that
    differ by at most one. A share its cluster cannot hold is capped, and what it
    loses goes to the others in proportion; the second value is what nobody holds.
    """
    count = len(weights)
    shares = [0] * count
    caps = list(room) if room is not None else [None] * count
    active = [i for i in range(count) if weights[i] > 0 and caps[i] != 0]
    left = total
    while left > 0 and active:
        weight = sum(weights[i] for i in active)
        exact = [left * weights[i] / weight for i in active]
        grant = [math.floor(x) for x in exact]
        rest = left - sum(grant)
        order = sorted(range(len(active)), key=lambda k: (-(exact[k] - grant[k]), k))
        for k in order[:rest]:
            grant[k] += 1
        capped = []
        for k, i in enumerate(active):
            cap = caps[i]
            give = grant[k] if cap is None else min(grant[k], cap - shares[i])
            shares[i] += give
            left -= give
            if cap is not None and shares[i] >= cap:
                capped.append(i)
        if not capped:
            break
        active = [i for i in active if i not in capped]
    return shares, left


def copy_for(
    manifest: Sequence[Obj],
    shares: Sequence[int | None],
    index: int,
    labels: Mapping[str, str],
    overrides: Sequence[Override] = (),
) -> list[Obj]:
    """The manifest that cluster ``index`` of a placement runs.

    ``shares`` are every cluster's share of the application's replicas (None:
    each runs them all). Each replicated object is divided in the same
    proportions, so that a Job's completions follow its parallelism. Then the
    overrides whose cluster constraint matches ``labels`` are merged into the
    objects they name (lists of named items, such as containers, by name).
    """
    divided = all(share is not None for share in shares) and bool(shares)
    weights = [float(share or 0) for share in shares]
    matching = [o for o in overrides if LabelConstraint.parse(o.clusters).matches(labels)]
    out: list[Obj] = []
    for obj in manifest:
        fields = REPLICA_FIELDS.get(obj.get("kind", ""), ()) if divided else ()
        if fields or matching:
            obj = copy.deepcopy(obj)
        for field in fields:
            total = _count(obj, field)
            spec = obj.setdefault("spec", {})
            spec[field] = divide(total, weights)[0][index] if sum(weights) else 0
        name = (obj.get("metadata") or {}).get("name")
        for override in matching:
            if override.patch.kind == obj.get("kind") and override.patch.name == name:
                obj = strategic_merge(obj, override.patch.merge)
        out.append(obj)
    return out


def weight_of(weights: Any, labels: Mapping[str, str], free: int | None) -> float:
    """A cluster's weight: 1 (even), its room for pods (dynamic), its first matching rule's."""
    if weights == "even":
        return 1.0
    if weights == "dynamic":
        return 1.0 if free is None else float(free)
    for rule in weights:
        if LabelConstraint.parse(rule.clusters).matches(labels):
            return float(rule.weight)
    return 0.0
