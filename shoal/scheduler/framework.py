"""The scheduling framework: plugins with one job each, registered by name.

Phases, as in the Kubernetes scheduling framework:

- candidates: which backends are looked at at all (namespace, state);
- filters: constraints a backend must meet (labels, custom resources, metrics, room
  for the application's pods on its nodes);
- prefer: ranking preferences that narrow the set (backends with metrics win);
- scores: terms of the weighted average of normalised metric values (metrics, stickiness).

The commit phase (binding with a resource_version precondition) is the
handler's, since it talks to the API. A decision records for every backend
why it was dropped or how it scored: that is the explanation users see.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from shoal.machinery.plugins import Registry
from shoal.model.scheduler_config import Plugins
from shoal.scheduler.backends import Backend, BoolArray, FloatArray, Group


@dataclass
class Request:
    """What is being placed: constraints, where it is now, and how to treat it."""

    namespace: str | None
    labels: Sequence[str] = ()
    metrics: Sequence[str] = ()
    custom_resources: Sequence[str] = ()
    current: tuple[str | None, str] | None = None  # (namespace, name) of the backend it is on
    sticky: bool = True  # False: a forced pass ignores stickiness
    stickiness: float = 0.1
    # what one pod takes from a node (sorted (resource, amount) pairs; empty: not checked),
    # how many such pods a cluster must hold, and the pods of this application each
    # cluster already runs, which count as room for it (cluster name → pods)
    pod: tuple[tuple[str, int], ...] = ()
    pods: int = 0
    own: dict[str, int] = field(default_factory=dict)


@dataclass
class Context:
    request: Request
    group: Group
    current: int | None

    @classmethod
    def build(cls, request: Request, group: Group) -> Context:
        current = group.index.get(request.current) if request.current else None
        return cls(request, group, current)


class Plugin:
    name: ClassVar[str]




class CandidatePlugin(Plugin):
    def candidates(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        """(reason, keep) pairs; a backend is dropped by the first reason that fails it."""
        raise NotImplementedError


class FilterPlugin(Plugin):
    def filter(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        raise NotImplementedError


class PreferPlugin(Plugin):
    def prefer(self, ctx: Context, alive: BoolArray) -> tuple[str, BoolArray] | None:
        """Narrow a non-empty set of survivors, or None to leave it."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    def terms(self, ctx: Context) -> tuple[FloatArray, FloatArray]:
        """Numerator and denominator contributions of the weighted average."""
        raise NotImplementedError


PLUGINS: Registry[Plugin] = Registry(
    "the scheduler",
    # applications and clouds: candidates, filters, prefer, scores;
    # fleet pods (shoal.scheduler.pods.plugins): sort, pod-filters, pod-scores
    ("candidates", "filters", "prefer", "scores", "sort", "pod-filters", "pod-scores"),
)
register = PLUGINS.register
make_plugin = PLUGINS.make


@dataclass
class Rejection:
    reason: str
    count: int
    names: list[str]


@dataclass
class Decision:
    total: int
    chosen: Backend | None
    score: float | None
    rejections: list[Rejection]
    ranking: list[dict[str, Any]] = field(default_factory=list)
    available: int = 0
    ties: list[Backend] = field(default_factory=list)  # every backend with the best score
    namespace: str | None = None  # of an application, when its namespace has no cluster
    revisions: dict[str, str] = field(default_factory=dict)  # inputs of the clusters seen
    # every backend's score (-inf: dropped) and the backends, for placements on several
    scores: FloatArray | None = field(default=None, repr=False)
    backends: Sequence[Backend] = field(default=(), repr=False)
    _ranked: list[tuple[Backend, float]] | None = field(default=None, repr=False)
    summary_note: str | None = None  # what else kept it from being placed (replicas missing)
    _by_name: dict[str, tuple[Backend, float]] | None = field(default=None, repr=False)

    def find(self, name: str) -> tuple[Backend, float] | None:
        """A backend of ``ranked()`` and its score, by name (None: filtered out)."""
        if self._by_name is None:
            self._by_name = {backend.name: (backend, score) for backend, score in self.ranked()}
        return self._by_name.get(name)

    def ranked(self) -> list[tuple[Backend, float]]:
        """Every backend that passed the filters, best first (ties: in the group's order).

        Computed once per decision, which applications asking the same share.
        """
        if self._ranked is None:
            if self.scores is None:
                self._ranked = []
            else:
                alive = np.flatnonzero(np.isfinite(self.scores))
                order = alive[np.argsort(-self.scores[alive], kind="stable")]
                self._ranked = [(self.backends[int(i)], float(self.scores[i])) for i in order]
        return self._ranked

    @property
    def summary(self) -> str:
        if self.total == 0 and self.namespace is not None:
            # The usual surprise: clusters are registered in 'default', the app is elsewhere.
            # Other namespaces are not named: the reason is read by this namespace's users.
            return (
                f"no clusters in namespace {self.namespace!r} "
                f"(clusters are per namespace: register one in {self.namespace!r})"
            )
        head = f"{self.available}/{self.total} clusters available"
        if self.summary_note is not None:
            head = f"{self.summary_note}; {head}"
        if not self.rejections:
            return head
        parts = ", ".join(f"{r.count} {r.reason}" for r in self.rejections if r.count)
        return f"{head}: {parts}"

    def explanation(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "chosen": self.chosen.name if self.chosen else None,
            "score": self.score,
            "rejected": [
                {"reason": r.reason, "count": r.count, "clusters": r.names}
                for r in self.rejections
                if r.count
            ],
            "ranking": self.ranking,
            "clusters": self.revisions,
            "clusters_total": self.total,
        }


class Framework:
    """Runs the enabled plugins of each phase over a group of backends."""

    def __init__(self, plugins: Plugins, *, explain_names: int = 20, ranking: int = 5) -> None:
        self.candidates = [
            make_plugin(p, "candidates", CandidatePlugin) for p in plugins.candidates
        ]
        self.filters = [make_plugin(p, "filters", FilterPlugin) for p in plugins.filters]
        self.prefer = [make_plugin(p, "prefer", PreferPlugin) for p in plugins.prefer]
        self.scores = [make_plugin(p, "scores", ScorePlugin) for p in plugins.scores]
        self.explain_names = explain_names
        self.ranking = ranking
        self.random = random.Random()

    def decide(self, request: Request, group: Group, *, explain_all: bool = False) -> Decision:
        ctx = Context.build(request, group)
        total = len(group)
        alive = np.ones(total, dtype=bool)
        rejections: list[Rejection] = []

        def apply(reason: str, keep: BoolArray) -> None:
            nonlocal alive
            dropped = alive & ~keep
            count = int(dropped.sum())
            if count:
                limit = total if explain_all else self.explain_names
                names = [group.names[i] for i in np.flatnonzero(dropped)[:limit]]
                rejections.append(Rejection(reason, count, names))
                alive = alive & keep

        for plugin in self.candidates:
            for reason, keep in plugin.candidates(ctx):
                apply(reason, keep)
        for filt in self.filters:
            for reason, keep in filt.filter(ctx):
                apply(reason, keep)
        available = int(alive.sum())
        if not available:
            return Decision(total, None, None, rejections, available=0)
        for pref in self.prefer:
            narrowed = pref.prefer(ctx, alive)
            if narrowed is not None:
                apply(*narrowed)

        num = np.zeros(total)
        den = np.zeros(total)
        for scorer in self.scores:
            n, d = scorer.terms(ctx)
            num += n
            den += d
        # With metrics, the weighted average (as Krake scores); without, the stickiness term alone.
        metric_den = group.den
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = np.where(metric_den > 0, num / np.where(den > 0, den, 1.0), num)
        scores = np.where(alive, scores, -np.inf)
        best = float(scores.max())
        ties = np.flatnonzero(scores >= best - 1e-12)
        chosen = int(ties[0]) if len(ties) == 1 else int(self.random.choice(list(ties)))
        ranking = self._ranking(ctx, scores, alive, explain_all, best)
        return Decision(
            total,
            group.backends[chosen],
            best,
            rejections,
            ranking,
            available=available,
            ties=[group.backends[int(i)] for i in ties],
            scores=scores,
            backends=group.backends,
        )

    def _ranking(
        self, ctx: Context, scores: FloatArray, alive: BoolArray, explain_all: bool, best: float
    ) -> list[dict[str, Any]]:
        """The best clusters with their scores; score terms for the winners and the current one.

        Stored in every application's status and carried by each of its watch
        events, so it stays small; a dry run (``explain_all``) gives every term.
        """
        order = np.flatnonzero(alive)
        if not explain_all and len(order) > self.ranking:
            # Only the best few are kept: select them in linear time, then sort those.
            top = np.argpartition(-scores[order], self.ranking - 1)[: self.ranking]
            order = order[top]
        order = order[np.argsort(-scores[order], kind="stable")]
        out = []
        for i in order:
            backend = ctx.group.backends[int(i)]
            entry: dict[str, Any] = {"cluster": backend.name, "score": float(scores[i])}
            if explain_all or scores[i] >= best - 1e-12 or int(i) == ctx.current:
                entry["metrics"] = backend.terms_json
            if backend.failing:
                entry["failing_metrics"] = {k: r.code.name for k, r in backend.failing.items()}
            if ctx.current == int(i) and ctx.request.sticky:
                entry["stickiness"] = {"value": 1.0, "weight": ctx.request.stickiness}
            out.append(entry)
        return out
