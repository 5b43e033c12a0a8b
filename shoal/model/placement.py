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
from shoal.model.kubernetes import Override

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


def room(node_summary: Sequence[Obj], request: Mapping[str, int]) -> int | None:
    """How many more pods like ``request`` a cluster holds, from its observed node totals.

    Allocatable minus requested (the observer's ``node_summary`` totals), divided
    by the pod's request, per resource; the smallest is the answer. None when the
    observer has not summarised the cluster yet.
    """
    totals = next((entry for entry in node_summary if entry.get("summary")), None)
    if totals is None:
        return None
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
