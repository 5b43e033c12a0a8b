"""The scheduler's Prometheus metrics (its process's ``/metrics``).

Counters and histograms are updated where the work happens; the gauges of its
state (queue sizes, applications per cluster and state) are read at scrape time
from the scheduler's own caches, so keeping them costs nothing between scrapes.
docs/observability.md lists them with PromQL queries.
"""

from __future__ import annotations

import weakref
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shoal.controllers.prometheus import LATENCY

ATTEMPTS = Counter(
    "shoal_scheduler_attempts_total",
    "Scheduling passes over an application, by result (bound, kept, pinned, waiting, "
    "failed, skipped, deferred, error)",
    ["result"],
)
ATTEMPT_SECONDS = Histogram(
    "shoal_scheduler_attempt_duration_seconds",
    "Duration of one scheduling pass (decision and binding), by result",
    ["result"],
    buckets=LATENCY,
)
E2E_SECONDS = Histogram(
    "shoal_scheduler_e2e_scheduling_duration_seconds",
    "From an application's creation (or last spec change) to its placement, retries included",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
MIGRATIONS = Counter(
    "shoal_scheduler_migrations_total",
    "Applications bound to another cluster than the one they were on, by cause "
    "(score: another cluster now wins; cluster: theirs can no longer take them; forced: "
    "a reschedule request)",
    ["cause"],
)
def attempt(result: str, seconds: float) -> None:
    ATTEMPTS.labels(result).inc()
    ATTEMPT_SECONDS.labels(result).observe(seconds)


# gauges read at scrape time --------------------------------------------------------------

QueueSizes = Callable[[], dict[str, int]]
Placements = Callable[[], Iterable[tuple[str, str, str]]]


class _StateCollector(Collector):
    """Queue sizes and applications per cluster and state, from the live scheduler.

    Holds the scheduler weakly: the newest one registered in this process is
    the one described (one scheduler per process outside tests).
    """

    def __init__(self) -> None:
        self._queues: Callable[[], QueueSizes | None] = lambda: None
        self._placements: Callable[[], Placements | None] = lambda: None

    def watch(self, owner: Any, queues: QueueSizes, placements: Placements) -> None:
        ref = weakref.ref(owner)
        self._queues = lambda: queues if ref() is not None else None
        self._placements = lambda: placements if ref() is not None else None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queues = GaugeMetricFamily(
            "shoal_scheduler_queue_size",
            "Applications waiting in the scheduler: ready (to be scheduled now), backoff "
            "(retrying after a delay), unschedulable (parked until a cluster or spec change)",
            labels=["queue"],
        )
        apps = GaugeMetricFamily(
            "shoal_applications",
            "Applications per cluster they are bound to (none: not bound) and state",
            labels=["namespace", "cluster", "state"],
        )
        sizes = self._queues()
        if sizes is not None:
            for name, size in sizes().items():
                queues.add_metric([name], size)
        placements = self._placements()
        if placements is not None:
            for (namespace, cluster, state), count in Tally(placements()).items():
                apps.add_metric([namespace, cluster, state], count)
        yield queues
        yield apps

    def describe(self) -> Iterable[Any]:
        return []


STATE = _StateCollector()
REGISTRY.register(STATE)
