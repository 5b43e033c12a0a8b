"""Which clusters run an application with ``spec.placement``, and each one's share.

The framework filters and ranks the clusters as for any application; this module
only picks among its ranking and divides the replicas:

- slots: ``placement.clusters`` of them, filled from the fallback groups in
  order (all clusters when there are none), best score first, skipping a
  cluster whose ``spread_by`` label value an earlier pick carries;
- shares: divided replicas go in proportion to the weights (even, dynamic: the
  room the observer's nodes leave for this application's pods, counted node by
  node (``shoal.scheduler.plugins.fit``), or a
  static list), none above a cluster's room; what the picks cannot hold is
  taken by further clusters of the next groups, and is missing when none is
  left; duplicated replicas need clusters that hold them all;
- inertia: a pass that is not forced keeps every current cluster that still
  fits, with its share, and fills only the slots of those lost: only a lost
  share moves. A lost share with no cluster to replace it is carried by the
  clusters kept; a slot left empty is filled as soon as a cluster can take it
  (duplicated: a copy; divided: what the others carried for it, never their own
  share). A forced pass (reschedule) plans afresh;
- short: a placement on fewer clusters than it asked for says why (``short_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.machinery.resources import Amounts
from shoal.machinery.selectors import LabelConstraint
from shoal.model.placement import divide, weight_of
from shoal.model.placement_spec import Placement
from shoal.scheduler.backends import Backend


@dataclass
class Pick:
    """One chosen cluster, and what its share was computed from (the explanation)."""

    backend: Backend
    score: float
    group: int  # index of the fallback group it came from (0 without fallback)
    room: int | None  # pods of this application it can still hold (None: not known)
    weight: float
    replicas: int | None = None  # its share (None: duplicated, it runs them all)
    kept: bool = False  # a current cluster, kept where it is

    def explain(self, spread_by: str | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "cluster": self.backend.name,
            "replicas": self.replicas,
            "score": round(self.score, 6),
            "room": self.room,
            "weight": self.weight,
            "group": self.group,
        }
        if spread_by is not None:
            entry["spread"] = self.backend.labels.get(spread_by)
        if self.kept:
            entry["kept"] = True
        return entry


@dataclass
class Plan:
    picks: list[Pick] = field(default_factory=list)
    missing: int = 0  # replicas no chosen cluster can hold
    total: int | None = None  # the application's replicas (None: it has none)

    @property
    def clusters(self) -> list[tuple[str, int | None]]:
        return [(pick.backend.name, pick.replicas) for pick in self.picks]


def plan(
    placement: Placement,
    ranked: Sequence[tuple[Backend, float]],
    total: int | None,
    request: Amounts,
    current: Sequence[tuple[str, int | None]] = (),
    find: Callable[[str], tuple[Backend, float] | None] | None = None,
    own: Mapping[str, int] | None = None,
) -> Plan:
    """The clusters and shares for ``placement``, from the framework's ``ranked`` clusters.

    ``current``: the placements it has now, (cluster name, share), kept where
    they still fit (empty for a forced pass); ``find`` looks a cluster up in
    ``ranked`` by name (None: not there); ``own``: the pods of the application each
    cluster runs, which count as its room (None: its current shares). Candidates are
    looked at best first and only as far as needed: at 10,000 clusters a plan reads a
    few of them.
    """
    groups: list[LabelConstraint | None] = [LabelConstraint.parse(t) for t in placement.fallback]
    groups = groups or [None]
    divided = placement.replicas == "divided" and total is not None
    spread_by = placement.spread_by
    now = dict(current)
    pod = tuple(sorted(request.items()))

    def candidate(backend: Backend, score: float) -> Pick | None:
        group = next((index for index, g in enumerate(groups)
                      if g is None or g.matches(backend.labels)), None)  # fmt: skip
        if group is None:
            return None
        # room counts only for pods to hold: an application with none (nothing replicated,
        # or scaled to zero) needs none, as the framework's node-fit filter judges it
        free = backend.room(pod) if total else None
        if free is not None and own is not None:  # its own pods there count as room
            free += own.get(backend.name, 0)
        elif free is not None and backend.name in now:
            mine = now[backend.name]
            free += mine if mine is not None else (total or 0)
        weight = weight_of(placement.weights, backend.labels, free) if divided else 1.0
        if weight <= 0 or free == 0:
            return None  # a static list leaves it out, or it holds no pod of this application
        if not divided and total is not None and free is not None and free < total:
            return None  # duplicated: every cluster runs them all
        return Pick(backend, score, group, free, weight)

    def in_order(first_group: int = 0) -> Iterator[Pick]:
        """Candidates group by group, best score first in each, made as they are read."""
        for index in range(first_group, len(groups)):
            for backend, score in ranked:
                pick = candidate(backend, score)
                if pick is not None and pick.group == index:
                    yield pick

    picks: list[Pick] = []
    taken: set[str | None] = set()

    def take(pick: Pick) -> None:
        picks.append(pick)
        if spread_by is not None:
            taken.add(pick.backend.labels.get(spread_by))

    def free_slot(pick: Pick) -> bool:
        return spread_by is None or pick.backend.labels.get(spread_by) not in taken

    if find is None and now:
        found = {backend.name: (backend, score) for backend, score in ranked}
        find = found.get
    for name in now:  # inertia: the current clusters that still fit stay, in their order
        entry = find(name) if find is not None else None
        pick = candidate(*entry) if entry is not None else None
        if pick is not None and free_slot(pick) and len(picks) < placement.clusters:
            pick.kept = True
            take(pick)
    if len(picks) < placement.clusters:
        for pick in in_order():
            if pick.backend.name not in now and free_slot(pick):
                take(pick)
                if len(picks) >= placement.clusters:
                    break

    result = Plan(picks=picks, total=total)
    if not divided:
        return result
    assert total is not None
    kept = [pick for pick in picks if pick.kept]
    same_total = bool(now) and all(n is not None for n in now.values()) and (
        sum(n or 0 for n in now.values()) == total
    )
    if kept and same_total:
        # Only a lost share moves: the clusters kept keep theirs (as far as they still
        # hold them); what the lost clusters ran goes to the new picks, or, when no
        # cluster replaces them, to the clusters kept, which carry it for the empty
        # slot. A slot filled again (more clusters than now) takes back what the others
        # carried for it: none keeps more than a fresh division gives it.
        fair: list[int] | None = None
        if len(picks) > len(now):
            fair = divide(total, [p.weight for p in picks], [p.room for p in picks])[0]
        for index, pick in enumerate(picks):
            if not pick.kept:
                continue
            share = now[pick.backend.name] or 0
            if fair is not None:
                share = min(share, fair[index])
            pick.replicas = share if pick.room is None else min(share, pick.room)
        new = [pick for pick in picks if not pick.kept]
        movers = new or kept
        shares, missing = divide(
            total - sum(pick.replicas or 0 for pick in kept),
            [pick.weight for pick in movers],
            [None if p.room is None else p.room - (p.replicas or 0) for p in movers],
        )
        for pick, share in zip(movers, shares, strict=True):
            pick.replicas = (pick.replicas or 0) + share
    else:
        shares, missing = divide(total, [p.weight for p in picks], [p.room for p in picks])
        for pick, share in zip(picks, shares, strict=True):
            pick.replicas = share
    # what the picks cannot hold goes to further clusters of the later groups (without
    # fallback groups, only the chosen clusters share them)
    chosen = {pick.backend.name for pick in picks}
    for pick in in_order(first_group=1) if missing else ():
        if pick.backend.name in chosen or not free_slot(pick):
            continue
        pick.replicas = missing if pick.room is None else min(missing, pick.room)
        missing -= pick.replicas
        take(pick)
        if not missing:
            break
    # a cluster whose share is 0 runs nothing (scaled to 0: the best one keeps the objects)
    result.picks = [pick for pick in picks if pick.replicas] or picks[:1]
    result.missing = missing
    return result


def short_of(
    placement: Placement, plan: Plan, ranked: Sequence[tuple[Backend, float]],
    everyone: Sequence[Backend], summary: str,
) -> str | None:  # fmt: skip
    """Why ``plan`` runs on fewer clusters than ``placement`` asked for (None: it does not).

    A divided placement of fewer replicas than clusters asks for one cluster per
    replica. ``everyone``: the namespace's clusters (is the ``spread_by`` label on any
    of them?); ``summary``: the framework's account of the clusters that fit.
    """
    asked = placement.clusters
    if placement.replicas == "divided" and plan.total is not None:
        asked = min(asked, max(plan.total, 1))
    got = len(plan.picks)
    if got >= asked:
        return None
    head = f"on {got} of {asked} clusters asked for"
    label = placement.spread_by
    if label is not None:
        if not any(label in backend.labels for backend in everyone):
            return f"{head}: no cluster has the spread_by label {label!r}"
        values = {backend.labels.get(label) for backend, _ in ranked}
        if len(values) < asked:
            shown = ", ".join(sorted("no label" if v is None else v for v in values))
            return (
                f"{head}: the clusters that fit have {len(values)} distinct values of "
                f"label {label!r} ({shown}); {summary}"
            )
    return f"{head}: {summary}"
