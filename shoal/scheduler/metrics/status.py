"""The health of each metrics provider, written to its status when it changed meaningfully.

A provider's latency and last fetch move on every fetch; writing each would make a write
per provider per refresh. A change of reason or of consecutive errors, or the first
fetch, is written at once; the rest at most every ``PROVIDER_STATUS_MAX_AGE`` seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from shoal.client.rest import ApiError, ShoalClient
from shoal.events import Recorder, reasons
from shoal.model.core import GlobalMetricsProvider, MetricsProvider, MetricsProviderStatus
from shoal.scheduler.metrics.cache import MetricCache

log = logging.getLogger(__name__)

#: Seconds between two writes of a provider's status that only refresh latency/last fetch.
PROVIDER_STATUS_MAX_AGE = 60.0


class ProviderStatusWriter:
    """Writes providers' health from the metric cache; remembers when it last wrote each."""

    def __init__(self, client: ShoalClient, metrics: MetricCache) -> None:
        self.client = client
        self.metrics = metrics
        self.last_written: dict[tuple[str, str | None, str], float] = {}

    async def sync(
        self, providers: Iterable[GlobalMetricsProvider | MetricsProvider], events: Recorder
    ) -> int:
        """Write each provider's health to its status when it changed meaningfully.

        Reason or consecutive errors changed, or the first fetch: at once;
        only latency/last fetch moved: at most every PROVIDER_STATUS_MAX_AGE s.
        """
        written = 0
        now = time.monotonic()
        seen: set[tuple[str, str | None, str]] = set()
        for obj in providers:
            ns, name = obj.metadata.namespace, obj.metadata.name
            key: tuple[str, str | None, str] = (obj.kind, ns, name)
            seen.add(key)
            status = self.metrics.provider_status(isinstance(obj, MetricsProvider), ns, name)
            if status is None or status.last_fetch is None:
                continue
            current: MetricsProviderStatus = obj.status
            if not self._due(key, current, status, now):
                continue
            try:
                await self.client.update_status(obj.model_copy(update={"status": status}))
            except ApiError as error:  # deleted or changed meanwhile: next round
                log.debug("status of provider %s: %s", name, error)
                continue
            self.last_written[key] = now
            reasons.provider_health(events, obj, current.reason, status)
            written += 1
        for key in set(self.last_written) - seen:
            del self.last_written[key]
        return written

    def _due(
        self,
        key: tuple[str, str | None, str],
        current: MetricsProviderStatus,
        status: MetricsProviderStatus,
        now: float,
    ) -> bool:
        """The status differs, and either says something new or was last written long ago."""
        news = (
            current.last_fetch is None
            or current.reason != status.reason
            or current.errors != status.errors
        )
        last = self.last_written.get(key)
        if not news and last is not None and now - last < PROVIDER_STATUS_MAX_AGE:
            return False
        return current != status
