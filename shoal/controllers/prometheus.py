"""Prometheus metrics of the scheduler and the controllers (each process's ``/metrics``).

Counters and histograms are updated where the work happens; gauges that
describe a state (queue sizes, applications per cluster and state) are read at
scrape time from the component's own caches, so keeping them costs nothing
between scrapes. A process serves them with ``--metrics-port`` (the API
serves its own on ``/metrics``); ``shoal up --single-process`` and tests that
run components inside the API's process expose them on the API's ``/metrics``.
They name tenants' namespaces and clusters: with ``$SHOAL_METRICS_TOKEN`` set
(``shoal up`` sets it), a scrape must present it as a bearer token.
Names follow Prometheus conventions: a ``shoal_`` prefix, the component,
base units (seconds) and ``_total`` on counters. docs/observability.md lists
them with PromQL queries.
"""

from __future__ import annotations

import hmac
import threading
import time
import weakref
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, Counter, Histogram, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

T = TypeVar("T")

TOKEN_SETTING = "SHOAL_METRICS_TOKEN"
"""The bearer token a scrape of a component's ``/metrics`` must present (unset: none)."""

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

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
    buckets=_LATENCY,
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
KUBE_APPLY_SECONDS = Histogram(
    "shoal_kube_apply_duration_seconds",
    "Duration of applying an application's manifest to a member cluster",
    ["cluster"],
    buckets=_LATENCY,
)
KUBE_APPLY_ERRORS = Counter(
    "shoal_kube_apply_errors_total",
    "Applications of a manifest to a member cluster that failed",
    ["cluster"],
)


def attempt(result: str, seconds: float) -> None:
    ATTEMPTS.labels(result).inc()
    ATTEMPT_SECONDS.labels(result).observe(seconds)


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


# serving ---------------------------------------------------------------------------------

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def with_token(app: WsgiApp, token: str) -> WsgiApp:
    """``app`` for requests with ``Authorization: Bearer <token>`` (compared in constant
    time); a 401 for the others."""
    expected = f"Bearer {token}".encode()

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        given = str(environ.get("HTTP_AUTHORIZATION", "")).encode("latin-1", "replace")
        if hmac.compare_digest(given, expected):
            return app(environ, start_response)
        body = b"metrics: send the scrape token as a bearer token\n"
        headers = [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="shoal"')]
        start_response("401 Unauthorized", headers)
        return [body]

    return guarded


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per scrape."""


def serve_metrics(port: int, addr: str, token: str | None) -> WSGIServer:
    """This process's registry on ``http://addr:port/metrics`` (a thread of its own),
    for scrapes that present ``token`` when one is given."""
    from prometheus_client.exposition import ThreadingWSGIServer

    app: WsgiApp = make_wsgi_app(REGISTRY)
    if token:
        app = with_token(app, token)
    server = make_server(addr, port, app, ThreadingWSGIServer, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
