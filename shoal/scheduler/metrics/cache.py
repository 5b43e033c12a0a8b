"""The metric value cache: the scheduler's only source of metric values.

Providers are slow and may be down; the scheduler must decide in
microseconds and reproducibly. So the cache fetches every metric in use
once per ``refresh_interval`` — one ``fetch`` per provider, covering all of
that provider's metrics, whatever number of clusters and applications refer
to them — and ``lookup`` answers synchronously from what it fetched last.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import aiohttp

from shoal.machinery import outbound
from shoal.model.base import Reason, ReasonCode
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    MetricsProviderStatus,
)
from shoal.scheduler.metrics.fetch import (
    FETCH_ERRORS,
    FETCH_SECONDS,
    Provider,
    ProviderHealth,
    ProviderKey,
    fetch,
    provider_label,
)
from shoal.scheduler.metrics.providers import MetricError, MetricsProviderClient, provider_client

__all__ = [
    "MetricCache",
    "MetricKey",
    "MetricValue",
    "OnChange",
]

log = logging.getLogger(__name__)

#: ``(namespaced, namespace, name)`` of a Metric (namespace set) or GlobalMetric (None).
MetricKey = tuple[bool, str | None, str]
OnChange = Callable[[set[MetricKey]], Awaitable[None] | None]
#: A value a provider serves: the provider and the name it is fetched by.
Value = tuple[ProviderKey, str]

@dataclass(frozen=True, slots=True)
class MetricValue:
    """A valid metric value; the weight belongs to the referring resource."""

    value: float
    normalised: float


class MetricCache:
    """Values of the metrics in use, refreshed every ``refresh_interval`` seconds.

    Fed with the Metric/GlobalMetric and (Global)MetricsProvider objects
    (``set_*``/``remove_*``, typically from informers). The metrics in use
    are those given to ``track``, or every known metric when ``track`` was
    never called (or called with None), plus any metric looked up since.
    """

    def __init__(
        self,
        *,
        refresh_interval: float = 10.0,
        timeout: float = 5.0,
        on_change: OnChange | None = None,
        http: aiohttp.ClientSession | None = None,
    ) -> None:
        self.refresh_interval = refresh_interval
        self.timeout = timeout
        self.on_change = on_change
        self._http = http
        self._own_http = http is None
        # a namespaced provider's URL is a tenant's: fetched under the outbound policy
        self._tenant_http: aiohttp.ClientSession | None = None
        self._metrics: dict[MetricKey, Metric | GlobalMetric] = {}
        self._providers: dict[ProviderKey, Provider] = {}
        self._values: dict[ProviderKey, dict[str, float | MetricError]] = {}
        self._tracked: set[MetricKey] | None = None
        self._wanted: set[MetricKey] = set()
        self._seen: dict[MetricKey, MetricValue | MetricError] = {}
        self._retired: list[MetricsProviderClient] = []
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._refreshes = 0
        # A refresh looks up only the metrics whose fetched value moved or whose definition
        # changed (at 30,000 metrics, looking them all up held the scheduler's loop for half
        # a second every refresh). The index says which metrics in use read which value.
        self._readers: dict[Value, set[MetricKey]] = {}
        self._reads: dict[MetricKey, Value] = {}
        self._dirty: set[MetricKey] = set()  # to look up at the next diff
        self._reindex_all = False  # tracking changed: index every metric again
        self._plan_all: dict[ProviderKey, list[str]] | None = None  # None: to be made

    # ------------------------------------------------------------------ feeding

    def set_metric(self, obj: Metric | GlobalMetric) -> None:
        key = _metric_key(obj)
        old = self._metrics.get(key)
        self._metrics[key] = obj
        if old is None or old.spec != obj.spec:
            self._index(key)
        if old is None or old.spec.provider != obj.spec.provider:
            self._wake.set()

    def remove_metric(self, kind: str, namespace: str | None, name: str) -> None:
        """Forget a metric; ``kind`` is ``"Metric"`` or ``"GlobalMetric"``."""
        key = _key(kind == "Metric", namespace, name)
        self._metrics.pop(key, None)
        self._wanted.discard(key)
        self._index(key)

    def set_provider(self, obj: MetricsProvider | GlobalMetricsProvider) -> None:
        key = _key(isinstance(obj, MetricsProvider), obj.metadata.namespace, obj.metadata.name)
        current = self._providers.get(key)
        if current is not None and current.spec == obj.spec:
            return  # a status update: nothing to do
        if current is not None:
            self._retire(current)
            self._values.pop(key, None)
            current.spec = obj.spec
        else:
            self._providers[key] = Provider(spec=obj.spec, label=provider_label(key))
        self._provider_changed(key)
        self._wake.set()

    def remove_provider(self, kind: str, namespace: str | None, name: str) -> None:
        """Forget a provider; ``kind`` is ``"MetricsProvider"`` or ``"GlobalMetricsProvider"``."""
        key = _key(kind == "MetricsProvider", namespace, name)
        current = self._providers.pop(key, None)
        self._values.pop(key, None)
        self._provider_changed(key)
        if current is not None:
            self._retire(current)
            for metric in (FETCH_SECONDS, FETCH_ERRORS):
                try:
                    metric.remove(current.label)
                except KeyError:
                    pass

    def track(self, refs: Iterable[MetricKey] | None) -> None:
        """Declare the metrics in use, as ``(namespaced, namespace, name)``; None = all known."""
        self._tracked = None if refs is None else {_key(*ref) for ref in refs}
        self._wanted.clear()
        self._reindex_all = True
        self._wake.set()

    def _retire(self, provider: Provider) -> None:
        if provider.client is not None:
            self._retired.append(provider.client)
            provider.client = None
            provider.requests_seen = 0

    # ------------------------------------------------------------------ reading

    def lookup(
        self, name: str, namespaced: bool, namespace: str | None
    ) -> MetricValue | MetricError:
        """The value of a metric reference made from a resource in ``namespace``."""
        if namespaced and namespace is None:
            return MetricError(
                ReasonCode.UNKNOWN_METRIC,
                f"namespaced metric {name!r} referenced from a resource without a namespace",
            )
        key = _key(namespaced, namespace, name)
        metric = self._metrics.get(key)
        if metric is None:
            where = f" in namespace {namespace!r}" if namespaced else ""
            kind = "Metric" if namespaced else "GlobalMetric"
            return MetricError(ReasonCode.UNKNOWN_METRIC, f"{kind} {name!r} not found{where}")
        pkey = _key(namespaced, namespace, metric.spec.provider.name)
        if pkey not in self._providers:
            where = f" in namespace {namespace!r}" if namespaced else ""
            kind = "MetricsProvider" if namespaced else "GlobalMetricsProvider"
            return MetricError(
                ReasonCode.UNKNOWN_METRICS_PROVIDER,
                f"{kind} {metric.spec.provider.name!r} of metric {name!r} not found{where}",
            )
        raw = self._values.get(pkey, {}).get(metric.spec.provider.metric)
        if raw is None:
            if key not in self._wanted and not self._in_use_contains(key):
                self._wanted.add(key)
                self._index(key)
                self._wake.set()
            return MetricError(
                ReasonCode.UNREACHABLE_METRICS_PROVIDER,
                f"no value of metric {name!r} fetched yet from provider "
                f"{metric.spec.provider.name!r}",
                pending=True,
            )
        if isinstance(raw, MetricError):
            return raw
        problem = metric.spec.check(raw)
        if problem is not None:
            return MetricError(ReasonCode.INVALID_METRIC, f"metric {name!r}: {problem}")
        return MetricValue(value=raw, normalised=metric.spec.normalise(raw))

    def health(self) -> dict[ProviderKey, ProviderHealth]:
        return {key: p.health for key, p in self._providers.items()}

    def provider_status(
        self, namespaced: bool, namespace: str | None, name: str
    ) -> MetricsProviderStatus | None:
        """The provider's health as its ``status`` subresource shows it (None if unknown)."""
        provider = self._providers.get(_key(namespaced, namespace, name))
        if provider is None:
            return None
        h = provider.health
        reason = None
        if h.consecutive_errors:
            reason = Reason(
                code=ReasonCode.UNREACHABLE_METRICS_PROVIDER, message=h.last_error or ""
            )
        return MetricsProviderStatus(
            reason=reason,
            last_fetch=h.last_fetch.isoformat().replace("+00:00", "Z") if h.last_fetch else None,
            fetch_latency_seconds=h.latency,
            errors=h.consecutive_errors,
        )

    def stats(self) -> dict[str, dict[str, int]]:
        """Per provider label: fetches, HTTP requests, failed fetches, metrics last fetched."""
        return {
            p.label: {
                "fetches": p.health.fetches,
                "requests": p.health.requests,
                "errors": p.health.errors,
                "metrics": p.health.metrics,
            }
            for p in self._providers.values()
        }

    @property
    def refreshes(self) -> int:
        return self._refreshes

    # ------------------------------------------------------------------ refreshing

    def _in_use_contains(self, key: MetricKey) -> bool:
        return key in self._metrics and (self._tracked is None or key in self._tracked)

    def _in_use(self) -> set[MetricKey]:
        base = set(self._metrics) if self._tracked is None else self._tracked & set(self._metrics)
        return base | (self._wanted & set(self._metrics))

    def _index(self, key: MetricKey) -> None:
        """Index the metric again (it came, went, changed, or came into use); look it up at
        the next diff."""
        self._dirty.add(key)
        self._plan_all = None
        old = self._reads.pop(key, None)
        if old is not None:
            readers = self._readers[old]
            readers.discard(key)
            if not readers:
                del self._readers[old]
        if key in self._wanted or self._in_use_contains(key):
            ref = self._metrics[key].spec.provider
            value = (_key(key[0], key[1], ref.name), ref.metric)
            self._reads[key] = value
            self._readers.setdefault(value, set()).add(key)

    def _provider_changed(self, key: ProviderKey) -> None:
        """Its metrics' lookups change (a provider that is not there is their error)."""
        self._plan_all = None
        self._dirty.update(metric for metric, (pkey, _) in self._reads.items() if pkey == key)

    def _indexed(self) -> dict[Value, set[MetricKey]]:
        """Which metrics in use read which value, made again whole when tracking changed
        (every metric is then looked up at the next diff)."""
        if self._reindex_all:
            self._reindex_all = False
            self._plan_all = None
            self._dirty.update(self._reads, self._seen)
            self._readers, self._reads = {}, {}
            for key in self._in_use():
                self._index(key)
        return self._readers

    def _plan(self, pending_only: bool) -> dict[ProviderKey, list[str]]:
        """Per provider, the names to fetch (sorted): of every metric in use, or of those
        with no value yet. The whole plan is kept until a metric in use changes."""
        readers = self._indexed()
        if not pending_only and self._plan_all is not None:
            return self._plan_all
        plan: dict[ProviderKey, list[str]] = {}
        for pkey, name in readers:
            if pkey in self._providers and not (
                pending_only and name in self._values.get(pkey, {})
            ):
                plan.setdefault(pkey, []).append(name)
        for names in plan.values():
            names.sort()
        if not pending_only:
            self._plan_all = plan
        return plan

    async def refresh_now(self) -> set[MetricKey]:
        """Fetch every metric in use (one fetch per provider); the metrics that changed."""
        return await self._refresh(pending_only=False)

    async def refresh_pending(self) -> set[MetricKey]:
        """Fetch only the metrics in use that have no value or error yet."""
        return await self._refresh(pending_only=True)

    async def _refresh(self, pending_only: bool) -> set[MetricKey]:
        async with self._lock:
            await self._close_retired()
            plan = self._plan(pending_only)
            keys = list(plan)
            results = await asyncio.gather(*(self._fetch(k, plan[k]) for k in keys))
            fetched = dict(zip(keys, results, strict=True))
            moved = _moved(self._values, fetched, whole=not pending_only)
            if pending_only:
                for pkey, result in fetched.items():
                    self._values.setdefault(pkey, {}).update(result)
            else:
                self._values = fetched
            self._refreshes += 1
            changed = self._diff(moved)
        if changed and self.on_change is not None:
            outcome = self.on_change(changed)
            if inspect.isawaitable(outcome):
                await outcome
        return changed

    async def _fetch(self, pkey: ProviderKey, names: list[str]) -> dict[str, float | MetricError]:
        provider = self._providers[pkey]
        if provider.client is None:
            tenant = pkey[0]  # a namespaced provider
            provider.client = provider_client(
                provider.spec, timeout=self.timeout, http=self._client(tenant), tenant=tenant
            )
        return await fetch(provider, provider.client, names, self.timeout)

    def _diff(self, moved: set[Value]) -> set[MetricKey]:
        """The metrics whose value or error is not what the last diff saw (one that is no
        longer in use counts as changed): those that read a value that ``moved``, and those
        indexed again since."""
        readers = self._indexed()
        look = self._dirty
        self._dirty = set()
        for value in moved:
            look.update(readers.get(value, ()))
        changed: set[MetricKey] = set()
        seen = self._seen
        for key in look:
            if key in self._reads:
                now = self.lookup(key[2], key[0], key[1])
                if now != seen.get(key):
                    seen[key] = now
                    changed.add(key)
            elif seen.pop(key, None) is not None:
                changed.add(key)
        return changed

    def _client(self, tenant: bool = False) -> aiohttp.ClientSession:
        if tenant:
            if self._tenant_http is None:
                self._tenant_http = outbound.session(
                    timeout=aiohttp.ClientTimeout(total=self.timeout)
                )
            return self._tenant_http
        if self._http is None:
            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=100),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        return self._http

    async def _close_retired(self) -> None:
        retired, self._retired = self._retired, []
        for client in retired:
            await client.close()

    async def run(self) -> None:
        """Refresh everything every ``refresh_interval``, and new metrics as soon as they come."""
        next_full = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_full:
                self._wake.clear()
                await self._guard(self.refresh_now)
                next_full = now + self.refresh_interval
                continue
            try:
                async with asyncio.timeout(next_full - now):
                    await self._wake.wait()
            except TimeoutError:
                continue
            self._wake.clear()
            await self._guard(self.refresh_pending)

    async def _guard(self, refresh: Callable[[], Awaitable[set[MetricKey]]]) -> None:
        try:
            await refresh()
        except Exception:  # the task's top level: log and retry at the next round
            log.exception("metric cache refresh failed")

    async def close(self) -> None:
        for provider in self._providers.values():
            self._retire(provider)
        await self._close_retired()
        if self._own_http and self._http is not None:
            await self._http.close()
            self._http = None
        if self._tenant_http is not None:
            await self._tenant_http.close()
            self._tenant_http = None

    async def __aenter__(self) -> MetricCache:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _key(namespaced: bool, namespace: str | None, name: str) -> MetricKey:
    return (namespaced, namespace if namespaced else None, name)


def _metric_key(obj: Metric | GlobalMetric) -> MetricKey:
    return _key(isinstance(obj, Metric), obj.metadata.namespace, obj.metadata.name)


_ABSENT = object()


def _moved(
    before: dict[ProviderKey, dict[str, float | MetricError]],
    fetched: dict[ProviderKey, dict[str, float | MetricError]],
    *,
    whole: bool,
) -> set[Value]:
    """The values that ``fetched`` changes; ``whole``: it replaces ``before`` (what it
    lacks is gone), else it adds to it."""
    moved: set[Value] = set()
    for pkey, result in fetched.items():
        old = before.get(pkey, {})
        if old == result:
            continue
        moved.update((pkey, n) for n, v in result.items() if old.get(n, _ABSENT) != v)
        if whole:
            moved.update((pkey, n) for n in old.keys() - result.keys())
    if whole:
        for pkey in before.keys() - fetched.keys():
            moved.update((pkey, n) for n in before[pkey])
    return moved
