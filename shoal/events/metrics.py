"""The recorder's own Prometheus metrics: what was emitted, written, dropped, and at what cost."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

EMITTED = Counter(
    "shoal_events_emitted_total", "Event occurrences emitted by a component", ["component"]
)
WRITTEN = Counter(
    "shoal_events_written_total",
    "Events written to the API (one per distinct event and flush)",
    ["component"],
)
DROPPED = Counter(
    "shoal_events_dropped_total",
    "Event occurrences dropped (too many pending, or refused by the API)",
    ["component"],
)
FLUSH_ERRORS = Counter(
    "shoal_events_flush_errors_total", "Event batches the API did not take", ["component"]
)
FLUSH_SECONDS = Histogram(
    "shoal_events_flush_seconds",
    "Duration of one batch write of events",
    ["component"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
STORED = Counter(
    "shoal_events_stored_total", "Event occurrences the API stored from POST /core/events batches"
)
STORE_CPU = Counter(
    "shoal_events_store_cpu_seconds_total",
    "CPU seconds the API's event loop spent checking and storing POST /core/events batches",
)
