"""The kube controller's Prometheus metrics: how long applying to a member cluster
takes, and how often it fails. docs/observability.md lists them."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TypeVar

from prometheus_client import Counter, Histogram

from shoal.controllers.prometheus import LATENCY

T = TypeVar("T")

KUBE_APPLY_SECONDS = Histogram(
    "shoal_kube_apply_duration_seconds",
    "Duration of applying an application's manifest to a member cluster",
    ["cluster"],
    buckets=LATENCY,
)
KUBE_APPLY_ERRORS = Counter(
    "shoal_kube_apply_errors_total",
    "Applications of a manifest to a member cluster that failed",
    ["cluster"],
)


async def timed_apply(cluster: str, work: Awaitable[T]) -> T:
    """Await ``work`` (an apply to ``cluster``), timing it and counting its failure."""
    start = time.perf_counter()
    try:
        return await work
    except Exception:
        KUBE_APPLY_ERRORS.labels(cluster).inc()
        raise
    finally:
        KUBE_APPLY_SECONDS.labels(cluster).observe(time.perf_counter() - start)
