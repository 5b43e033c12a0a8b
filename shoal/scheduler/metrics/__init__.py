"""Metric values for the scheduler: provider clients and the value cache."""

from shoal.scheduler.metrics.cache import MetricCache, MetricKey, MetricValue
from shoal.scheduler.metrics.fetch import ProviderHealth
from shoal.scheduler.metrics.providers import MetricError, MetricsProviderClient, provider_client

__all__ = [
    "MetricCache",
    "MetricError",
    "MetricKey",
    "MetricValue",
    "MetricsProviderClient",
    "ProviderHealth",
    "provider_client",
]
