"""The scheduler's view of clusters (or clouds) per namespace, as arrays: its backends.

The metric part of a cluster's score does not depend on the application
(Σ normalised value × weight / Σ weight), so it is computed once per
cluster and metric refresh, and a decision for one application is a few numpy
operations over the namespace's clusters. Constraint masks are cached per
constraint text until a backend changes, so applications sharing constraints
share the work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from shoal.machinery.selectors import LabelConstraint, MetricConstraint
from shoal.model.base import Kind, Reason, ReasonCode
from shoal.model.constraints import MetricRef
from shoal.model.kubernetes import Cluster
from shoal.model.placement import room

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


class MetricSource(Protocol):
    """Where metric values come from: the metric cache (never a provider directly)."""

    def lookup(self, name: str, namespaced: bool, namespace: str | None) -> Any:
        """An object with ``value`` and ``normalised``, or one with ``code`` and ``message``."""
        ...


@dataclass(slots=True)
class MetricTerm:
    name: str
    weight: float
    value: float
    normalised: float


@dataclass(slots=True)
class Backend:
    """One cluster (or cloud) as the scheduler sees it."""

    obj: Kind
    name: str
    namespace: str | None
    labels: dict[str, str]
    custom_resources: frozenset[str]
    state: str
    schedulable: bool
    metric_refs: list[MetricRef]
    # a failing metric keeps it from being chosen (clusters, as Krake); a cloud with one
    # ranks as one without metrics, as Krake ranks clouds
    failing_excludes: bool = False
    terms: list[MetricTerm] = field(default_factory=list)
    failing: dict[str, Reason] = field(default_factory=dict)
    # failing metrics whose value is only not fetched yet (new metric or provider)
    pending: set[str] = field(default_factory=set)
    num: float = 0.0
    den: float = 0.0
    terms_json: list[dict[str, Any]] = field(default_factory=list)  # explanations reuse it
    rooms: dict[tuple[tuple[str, int], ...], int | None] = field(default_factory=dict)

    def room(self, pod: tuple[tuple[str, int], ...]) -> int | None:
        """How many more pods of requests ``pod`` its nodes hold (None: not known, or not a
        cluster); counted once per pod size for as long as the backend is unchanged."""
        if pod not in self.rooms:
            obj = self.obj
            summary = obj.status.node_summary if isinstance(obj, Cluster) else []
            self.rooms[pod] = room(summary, dict(pod)) if summary else None
        return self.rooms[pod]

    @property
    def has_metrics(self) -> bool:
        return self.den > 0

    @property
    def metrics_failing(self) -> bool:
        """A metric of it has no usable value (not merely one not fetched yet): Krake takes
        no such cluster, and a ranking that finds it makes it FAILING_METRICS."""
        return any(name not in self.pending for name in self.failing)

    def metric_value(self, name: str) -> float | None:
        for term in self.terms:
            if term.name == name:
                return term.value
        return None

    def evaluate_metrics(self, source: MetricSource | None) -> None:
        self.terms = []
        self.failing = {}
        self.pending = set()
        for ref in self.metric_refs:
            if source is None:
                self.failing[ref.name] = Reason(
                    code=ReasonCode.UNKNOWN_METRIC, message="no metric source"
                )
                continue
            result = source.lookup(ref.name, ref.namespaced, self.namespace)
            if hasattr(result, "normalised"):
                self.terms.append(
                    MetricTerm(ref.name, ref.weight, float(result.value), float(result.normalised))
                )
            else:
                self.failing[ref.name] = Reason(
                    code=getattr(result, "code", ReasonCode.UNKNOWN_METRIC),
                    message=str(getattr(result, "message", result)),
                )
                if getattr(result, "pending", False):
                    self.pending.add(ref.name)
        self.terms_json = [
            {"name": t.name, "value": t.value, "normalised": t.normalised, "weight": t.weight}
            for t in self.terms
        ]
        if self.failing:
            # A cluster with a failing metric is ranked as one without metrics.
            self.num = self.den = 0.0
        else:
            self.num = sum(t.normalised * t.weight for t in self.terms)
            self.den = sum(t.weight for t in self.terms)


class Group:
    """The backends of one namespace (plus global ones, for clouds), as arrays."""

    def __init__(self, backends: list[Backend]) -> None:
        self.backends = backends
        self.names = [b.name for b in backends]
        self.index = {(b.namespace, b.name): i for i, b in enumerate(backends)}
        self.schedulable: BoolArray = np.array([b.schedulable for b in backends], dtype=bool)
        self.num: FloatArray = np.array([b.num for b in backends], dtype=np.float64)
        self.den: FloatArray = np.array([b.den for b in backends], dtype=np.float64)
        self.has_metrics: BoolArray = self.den > 0
        self.failing = [b for b in backends if b.metrics_failing]
        self.metrics_usable: BoolArray = np.array(
            [not (b.metrics_failing and b.failing_excludes) for b in backends], dtype=bool
        )
        self._masks: dict[str, BoolArray] = {}

    def __len__(self) -> int:
        return len(self.backends)

    def mask(self, key: str, test: Callable[[Backend], bool]) -> BoolArray:
        cached = self._masks.get(key)
        if cached is None:
            cached = np.fromiter((test(b) for b in self.backends), dtype=bool, count=len(self))
            self._masks[key] = cached
        return cached

    def label_mask(self, constraint: str) -> BoolArray:
        parsed = LabelConstraint.parse(constraint)
        return self.mask("L:" + constraint, lambda b: parsed.matches(b.labels))

    def metric_mask(self, constraint: str) -> BoolArray:
        parsed = MetricConstraint.parse(constraint)
        return self.mask("M:" + constraint, lambda b: parsed.matches(b.metric_value(parsed.metric)))

    def resource_mask(self, crd: str) -> BoolArray:
        return self.mask("R:" + crd, lambda b: crd in b.custom_resources)


class Backends:
    """Backends of one kind, grouped per namespace; rebuilt lazily after changes."""

    def __init__(
        self,
        to_backend: Callable[[Kind], Backend | None],
        metrics: MetricSource | None = None,
        include_global: bool = False,
    ) -> None:
        self._to_backend = to_backend
        self.metrics = metrics
        self.include_global = include_global
        self._backends: dict[tuple[str | None, str, str], Backend] = {}
        self._groups: dict[str | None, Group] = {}
        self.version = 0

    def set(self, obj: Kind) -> Backend | None:
        key = (obj.metadata.namespace, obj.kind, obj.metadata.name)
        backend = self._to_backend(obj)
        if backend is None:
            self._backends.pop(key, None)
        else:
            backend.evaluate_metrics(self.metrics)
            self._backends[key] = backend
        self._invalidate(obj.metadata.namespace)
        return backend

    def remove(self, obj: Kind) -> None:
        self._backends.pop((obj.metadata.namespace, obj.kind, obj.metadata.name), None)
        self._invalidate(obj.metadata.namespace)

    def _invalidate(self, namespace: str | None) -> None:
        self.version += 1
        if namespace is None:
            self._groups.clear()
        else:
            self._groups.pop(namespace, None)

    def refresh_metrics(self) -> None:
        for backend in self._backends.values():
            backend.evaluate_metrics(self.metrics)
        self.version += 1
        self._groups.clear()

    def backends(self) -> Iterable[Backend]:
        return self._backends.values()

    def get(self, namespace: str | None, kind: str, name: str) -> Backend | None:
        return self._backends.get((namespace, kind, name))

    def group(self, namespace: str | None) -> Group:
        group = self._groups.get(namespace)
        if group is None:
            members = [
                b
                for (ns, _, _), b in sorted(self._backends.items(), key=lambda kv: kv[0][2])
                if ns == namespace or (self.include_global and ns is None)
            ]
            group = Group(members)
            self._groups[namespace] = group
        return group
