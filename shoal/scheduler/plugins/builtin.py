"""The built-in plugins. Each does one thing; enable them by name."""

from __future__ import annotations

import numpy as np

from shoal.scheduler.backends import BoolArray, FloatArray
from shoal.scheduler.framework import (
    CandidatePlugin,
    Context,
    FilterPlugin,
    PreferPlugin,
    ScorePlugin,
    register,
)


@register("candidates")
class NamespaceCandidates(CandidatePlugin):
    """Backends of the request's namespace (the fleet groups them so; nothing to drop)."""

    name = "namespace"

    def candidates(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        return []


@register("candidates")
class SchedulableState(CandidatePlugin):
    """Only ONLINE backends (and FAILING_METRICS ones, whose metrics ``usable-metrics``
    judges) not being deleted."""

    name = "schedulable-state"

    def candidates(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        return [("not ONLINE", ctx.group.schedulable)]


@register("filters")
class UsableMetrics(FilterPlugin):
    """A cluster with a metric that has no usable value takes no application, as Krake's
    scheduler takes only ONLINE clusters and finds such a cluster FAILING_METRICS while
    ranking. One whose metric is only not fetched yet, and a cloud with a failing metric
    (as Krake ranks clouds), rank as backends without metrics."""

    name = "usable-metrics"

    def filter(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        return [("failing metrics", ctx.group.metrics_usable)]


@register("filters")
class LabelConstraints(FilterPlugin):
    """Every label constraint must hold; a backend lacking the label matches none."""

    name = "label-constraints"

    def filter(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        return [(f"label {c}", ctx.group.label_mask(c)) for c in ctx.request.labels]


@register("filters")
class MetricConstraints(FilterPlugin):
    """Every metric constraint must hold for the metric's value as the provider reports it."""

    name = "metric-constraints"

    def filter(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        return [(f"metric {c}", ctx.group.metric_mask(c)) for c in ctx.request.metrics]


@register("filters")
class CustomResources(FilterPlugin):
    """Every custom resource the application needs must be on the cluster."""

    name = "custom-resources"

    def filter(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        return [
            (f"custom resource {crd}", ctx.group.resource_mask(crd))
            for crd in ctx.request.custom_resources
        ]


@register("prefer")
class PreferMetrics(PreferPlugin):
    """Backends with metrics are preferred: when any survivor has them, the rest are dropped."""

    name = "prefer-metrics"

    def prefer(self, ctx: Context, alive: BoolArray) -> tuple[str, BoolArray] | None:
        if bool((alive & ctx.group.has_metrics).any()):
            return ("without metrics", ctx.group.has_metrics)
        return None


@register("scores")
class MetricsScore(ScorePlugin):
    """Σ normalised value × weight over Σ weight of the backend's metrics."""

    name = "metrics"

    def terms(self, ctx: Context) -> tuple[FloatArray, FloatArray]:
        return ctx.group.num, ctx.group.den


@register("scores")
class Stickiness(ScorePlugin):
    """Value 1.0 with weight ``stickiness``, only for the backend the application is on now."""

    name = "stickiness"

    def terms(self, ctx: Context) -> tuple[FloatArray, FloatArray]:
        num = np.zeros(len(ctx.group))
        den = np.zeros(len(ctx.group))
        if ctx.current is not None and ctx.request.sticky:
            num[ctx.current] = 1.0 * ctx.request.stickiness
            den[ctx.current] = ctx.request.stickiness
        return num, den
