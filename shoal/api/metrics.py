"""The API server's own Prometheus metrics (served on ``/metrics``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter(
    "shoal_api_requests_total", "API requests handled", ["method", "route", "status"]
)
LATENCY = Histogram(
    "shoal_api_request_seconds",
    "API request latency (until the response starts, for watches)",
    ["method", "route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
WATCHES = Gauge("shoal_api_watches", "Watch streams open now")
