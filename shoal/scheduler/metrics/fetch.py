"""One fetch from one metrics provider: every metric asked of it, each a value or the error
it stands for, and what the fetch tells of the provider's health (latency, errors) for its
status and for ``/metrics``.

The cache (``cache``) decides what to fetch and when; this module is how a fetch goes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prometheus_client import Counter, Histogram

from shoal.model.base import ReasonCode
from shoal.model.core import MetricsProviderSpec
from shoal.scheduler.metrics.providers import MetricError, MetricsProviderClient

log = logging.getLogger(__name__)

#: ``(namespaced, namespace, name)`` of a MetricsProvider or GlobalMetricsProvider.
ProviderKey = tuple[bool, str | None, str]

FETCH_SECONDS = Histogram(
    "shoal_metrics_provider_fetch_seconds",
    "Time of one fetch of all metrics in use from a metrics provider",
    ["provider"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
FETCH_ERRORS = Counter(
    "shoal_metrics_provider_errors_total",
    "Fetches from a metrics provider that found it unreachable",
    ["provider"],
)


@dataclass(slots=True)
class ProviderHealth:
    """What the cache saw of one provider."""

    last_fetch: datetime | None = None
    latency: float | None = None
    consecutive_errors: int = 0
    last_error: str | None = None
    fetches: int = 0
    requests: int = 0
    errors: int = 0
    metrics: int = 0


@dataclass(slots=True)
class Provider:
    """A provider the cache fetches from: its spec, its client, what it saw of it."""

    spec: MetricsProviderSpec
    label: str
    client: MetricsProviderClient | None = None
    requests_seen: int = 0
    health: ProviderHealth = field(default_factory=ProviderHealth)


def provider_label(key: ProviderKey) -> str:
    """``name`` of a global provider, ``namespace/name`` of a namespaced one."""
    namespaced, namespace, name = key
    return f"{namespace}/{name}" if namespaced else name


async def fetch(
    provider: Provider, client: MetricsProviderClient, names: list[str], timeout: float
) -> dict[str, float | MetricError]:
    """Every metric of ``names`` from one provider: a value, or the error it stands for
    (unreachable, timed out, unknown metric), with the provider's health updated."""
    started = time.monotonic()
    message = f"provider {provider.label!r} returned nothing"
    try:
        async with asyncio.timeout(timeout * 2):
            result = await client.fetch(names)
    except TimeoutError:
        result = {}
        message = f"provider {provider.label!r} timed out"
    except Exception as exc:  # a bug in one client must not stop every refresh
        log.exception("fetch from metrics provider %s failed", provider.label)
        result = {}
        message = f"provider {provider.label!r} failed: {exc}"
    if not result:
        error = MetricError(ReasonCode.UNREACHABLE_METRICS_PROVIDER, message)
        result = dict.fromkeys(names, error)
    if not result.keys() >= set(names):
        for name in names:  # a client that forgets a metric did not find it
            if name not in result:
                message = f"no value of {name!r} returned"
                result[name] = MetricError(ReasonCode.UNKNOWN_METRIC, message)
    latency = time.monotonic() - started
    h = provider.health
    h.fetches += 1
    h.requests += client.requests - provider.requests_seen
    provider.requests_seen = client.requests
    h.metrics = len(names)
    h.last_fetch = datetime.now(UTC)
    h.latency = latency
    FETCH_SECONDS.labels(provider.label).observe(latency)
    down = next(
        (
            v
            for v in result.values()
            if isinstance(v, MetricError) and v.code == ReasonCode.UNREACHABLE_METRICS_PROVIDER
        ),
        None,
    )
    if down is not None:
        h.errors += 1
        h.consecutive_errors += 1
        h.last_error = down.message
        FETCH_ERRORS.labels(provider.label).inc()
    else:
        h.consecutive_errors = 0
        h.last_error = None
    return result
