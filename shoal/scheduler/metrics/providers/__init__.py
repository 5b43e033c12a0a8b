"""Clients of the metrics providers, one module per provider type, chosen by ``type``.

Every client answers one ``fetch`` for a whole batch of metrics and never raises
(``base``). ``PROVIDERS`` maps a provider's ``type`` to the function that builds its
client: a new provider type is a module here and one entry there.
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from shoal.model.core import MetricsProviderSpec
from shoal.scheduler.metrics.providers.base import MetricError, MetricsProviderClient
from shoal.scheduler.metrics.providers.influx import (
    INFLUX_RANGE,
    InfluxV1Client,
    InfluxV2Client,
    flux_query,
    influxql_query,
    parse_annotated_csv,
)
from shoal.scheduler.metrics.providers.kafka import KafkaClient, ksql_query
from shoal.scheduler.metrics.providers.prometheus import PrometheusClient, prometheus_batch_query
from shoal.scheduler.metrics.providers.static import StaticClient

__all__ = [
    "INFLUX_RANGE",
    "PROVIDERS",
    "InfluxV1Client",
    "InfluxV2Client",
    "KafkaClient",
    "MetricError",
    "MetricsProviderClient",
    "PrometheusClient",
    "StaticClient",
    "flux_query",
    "influxql_query",
    "ksql_query",
    "parse_annotated_csv",
    "prometheus_batch_query",
    "provider_client",
]

Build = Callable[[MetricsProviderSpec, float, aiohttp.ClientSession, bool], MetricsProviderClient]
"""How a client is built: the spec, the timeout, the session, whether its URL is a tenant's."""


def _prometheus(spec: MetricsProviderSpec, timeout: float, http: aiohttp.ClientSession, tenant: bool
                ) -> MetricsProviderClient:
    assert spec.prometheus is not None
    return PrometheusClient(spec.prometheus, timeout=timeout, http=http)


def _influx(spec: MetricsProviderSpec, timeout: float, http: aiohttp.ClientSession,
            tenant: bool) -> MetricsProviderClient:  # fmt: skip
    assert spec.influx is not None
    if spec.influx.version == 1:
        return InfluxV1Client(spec.influx, timeout=timeout, http=http)
    return InfluxV2Client(spec.influx, timeout=timeout, tenant=tenant)


def _kafka(spec: MetricsProviderSpec, timeout: float, http: aiohttp.ClientSession, tenant: bool
           ) -> MetricsProviderClient:
    assert spec.kafka is not None
    return KafkaClient(spec.kafka, timeout=timeout, http=http)


def _static(spec: MetricsProviderSpec, timeout: float, http: aiohttp.ClientSession, tenant: bool
            ) -> MetricsProviderClient:
    assert spec.static is not None
    return StaticClient(spec.static)


PROVIDERS: dict[str, Build] = {
    "prometheus": _prometheus,
    "influx": _influx,
    "kafka": _kafka,
    "static": _static,
}
"""A provider's ``type`` → the function that builds its client."""


def provider_client(
    spec: MetricsProviderSpec, *, timeout: float, http: aiohttp.ClientSession, tenant: bool = False
) -> MetricsProviderClient:
    """The client for ``spec``; HTTP clients share ``http`` and never close it. ``tenant``: the
    provider's URL is a tenant's (a namespaced provider's), reached under the outbound policy
    (``http`` is then a session of ``shoal.machinery.outbound``)."""
    return PROVIDERS[spec.type](spec, timeout, http, tenant)
