"""The informer: a local cache of one kind, kept current by list-then-watch.

Lists once, watches from the list's revision, resumes from the last revision
seen after a disconnect, and lists again only when the API answers 410 (the
revision was compacted); a re-list is diffed against the cache so handlers
see the changes they missed, exactly once. Handlers may be plain functions or
coroutines; an event older than what the cache holds is dropped.

With ``quiet``, each event is first read as decoded JSON: one that ``quiet``
says no handler needs is cached undecoded, and its model is built only when
``get`` or ``items`` reads it (building models is most of a watch's cost). The
next event that reaches the handlers comes as an update of the last decoded
copy, or as an addition when there is none.

``reads`` is the other way to say so: it names, from the decoded JSON, what the
handlers read of an object. An update whose ``reads`` equals the last event's
for that object is quiet. Every listing forgets them, so the first event after
one always reaches the handlers.

``keep`` trims an event's object to what the process reads, before anything
else reads it (the scheduler keeps three keys of an application's 5 KB
explanation, the kube controller none): fewer objects to build, and to keep,
which Python's collector walks once each in a burst. A listing's objects are
kept whole (they are put out of the collector's sight).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any, Generic, TypeVar

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shoal.client.rest import Gone, ShoalClient, Unreachable, WatchEvent
from shoal.machinery.listwatch import ListWatch
from shoal.machinery.memory import settle
from shoal.model.base import TRUSTED, Kind

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Kind)
Handler = Callable[[K], object | Awaitable[object]]
UpdateHandler = Callable[[K, K], object | Awaitable[object]]
ChangeHandler = Callable[[K, K | None], object | Awaitable[object]]  # (new, old)


_NUMBERS = itertools.count(1)  # names the informers of a process in their metrics


CacheKey = tuple[str | None, str]
"""(namespace, name) of a cached object; None for a cluster-wide one."""


def cache_key(obj: Kind) -> CacheKey:
    return (obj.metadata.namespace, obj.metadata.name)


@dataclass(eq=False)
class Informer(Generic[K]):
    """A cache of ``kind`` (in ``namespace``, or all) that calls the handlers on each change.

    ``on_change(new, old)`` is the short form for handlers that treat an addition
    (``old`` is None) and an update alike; ``on_add``/``on_update`` win when given too.
    """

    client: ShoalClient
    kind: type[K]
    namespace: str | None = None
    _: KW_ONLY
    on_add: Handler[K] | None = None
    on_update: UpdateHandler[K] | None = None
    on_delete: Handler[K] | None = None
    on_change: InitVar[ChangeHandler[K] | None] = None
    heartbeat: float = 10.0
    retry_delay: float = 0.2
    # (raw object) -> True when no handler needs the event: it is cached undecoded
    quiet: Callable[[dict[str, Any]], bool] | None = None
    # (raw object) -> what the handlers read of it: an update that leaves it equal is quiet
    reads: Callable[[dict[str, Any]], object] | None = None
    # (raw object) -> the part of it this process reads, in place of the whole (first:
    # ``quiet`` and ``reads`` see what it keeps)
    keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    cache: dict[tuple[str | None, str], K] = field(default_factory=dict, init=False, repr=False)
    # objects newer than their ``cache`` entry, decoded when read
    _raw: dict[tuple[str | None, str], dict[str, Any]] = field(
        default_factory=dict, init=False, repr=False
    )
    _known: dict[tuple[str | None, str], K] = field(default_factory=dict, init=False, repr=False)
    _read: dict[tuple[str | None, str], object] = field(
        default_factory=dict, init=False, repr=False
    )
    revision: int = field(default=0, init=False)
    synced: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    lists: int = field(default=0, init=False)  # how many times it listed (tests, metrics)
    number: int = field(default_factory=lambda: next(_NUMBERS), init=False)

    def __post_init__(self, on_change: ChangeHandler[K] | None) -> None:
        if on_change is not None:
            add, update = _split(on_change)
            self.on_add = self.on_add or add
            self.on_update = self.on_update or update

    def also(
        self,
        *,
        on_add: Handler[K] | None = None,
        on_update: UpdateHandler[K] | None = None,
        on_delete: Handler[K] | None = None,
        on_change: ChangeHandler[K] | None = None,
    ) -> None:
        """More handlers on this cache, called after the ones it has: one cache of a kind
        serves every part of a process that follows it. Added before the first listing,
        so that they see it."""
        if self.lists:
            raise RuntimeError(f"{self.kind.plural}: handlers added after the first listing")
        if on_change is not None:
            add, update = _split(on_change)
            on_add, on_update = on_add or add, on_update or update
        self.on_add = _chained(self.on_add, on_add)
        self.on_update = _chained(self.on_update, on_update)
        self.on_delete = _chained(self.on_delete, on_delete)

    def get(self, name: str, namespace: str | None = None) -> K | None:
        return self._current((namespace, name))

    def items(self) -> list[K]:
        for key in list(self._raw):
            self._current(key)
        return list(self.cache.values())

    def count(self) -> int:
        """How many objects the cache holds (decoded or not)."""
        return len(self.cache.keys() | self._raw.keys())

    def known(self, obj: K) -> K:
        """``obj`` is what the store holds at its revision (a writer's own result):
        when that revision comes as a quiet event, it is cached without decoding."""
        self._known[cache_key(obj)] = obj
        return obj

    def _current(self, key: tuple[str | None, str]) -> K | None:
        raw = self._raw.pop(key, None)
        if raw is not None:
            self.cache[key] = self.kind.model_validate(raw, context=TRUSTED)
        return self.cache.get(key)

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    async def run(self) -> None:
        """List and watch until cancelled; ``/metrics`` shows it meanwhile."""
        _LIVE.add(self)
        try:
            await ListWatch(
                self._relist,
                self._events,
                compacted=lambda error: isinstance(error, Gone),
                failed=self._failed,
                retry=self.retry_delay,
                max_retry=5.0,
            ).run()
        finally:
            _LIVE.discard(self)

    async def _events(self, revision: int) -> AsyncIterator[int]:
        """Apply each event from ``revision`` on; the cache's revision after each."""
        if self.quiet is not None or self.reads is not None:
            async for raw in self.client.watch_json(
                self.kind, self.namespace, resource_version=revision, heartbeat=self.heartbeat
            ):
                await self._apply_raw(raw)
                yield self.revision
            return
        async for event in self.client.watch(
            self.kind, self.namespace, resource_version=revision, heartbeat=self.heartbeat
        ):
            await self._apply(event)
            yield self.revision

    def _failed(self, error: Exception) -> None:
        if isinstance(error, (Unreachable, OSError)):
            log.debug("%s: watch interrupted: %s", self.kind.plural, error)
        else:
            log.error("%s: informer error; retrying", self.kind.plural, exc_info=error)

    async def _relist(self) -> int:
        """A fresh cache, with handlers called for what changed; the revision to watch from."""
        if self.lists:
            log.info("%s: listing again from revision %d", self.kind.plural, self.revision)
        result = await self.client.list(self.kind, self.namespace)
        self.lists += 1
        self.items()  # handlers compare with the decoded objects
        self._read.clear()  # the handlers see the listing itself
        fresh = {cache_key(obj): obj for obj in result.items}
        old = self.cache
        self.cache = dict(fresh)
        self.revision = result.revision
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                await _call(self.on_add, obj)
            elif previous.metadata.resource_version != obj.metadata.resource_version:
                await _call(self.on_update, previous, obj)
        for key, obj in old.items():
            if key not in fresh:
                await _call(self.on_delete, obj)
        self.synced.set()
        settle()  # the cache's objects live long: out of the collector's sight
        return self.revision

    def _quiet(self, key: CacheKey, raw: dict[str, Any]) -> bool:
        """No handler needs this update of ``key``: ``quiet`` says so, or ``reads`` is as before."""
        unchanged = False
        if self.reads is not None:
            now = self.reads(raw)
            before = self._read.get(key, _UNSEEN)
            self._read[key] = now
            unchanged = before == now
        return unchanged or (self.quiet is not None and self.quiet(raw))

    async def _apply_raw(self, event: dict[str, Any]) -> None:
        raw = event["object"]
        meta = raw["metadata"]
        revision = int(meta.get("resource_version") or 0)
        if revision <= self.revision:
            return
        key = (meta.get("namespace"), meta["name"])
        known = self._known.pop(key, None)
        if self.keep is not None:  # what waits undecoded is trimmed too
            raw = self.keep(raw)
        if event["type"] == "DELETED":
            self._read.pop(key, None)
        elif self._quiet(key, raw):
            self.revision = revision
            if known is not None and known.metadata.resource_version == revision:
                self.cache[key] = known
                self._raw.pop(key, None)
            else:
                self._raw[key] = raw
            return
        obj = self.kind.model_validate(raw, context=TRUSTED)
        await self._apply(WatchEvent(event["type"], obj, revision))

    async def _apply(self, event: WatchEvent[K]) -> None:
        if event.revision <= self.revision:
            return  # already seen (a resumed stream never repeats, but be safe)
        self.revision = event.revision
        obj = event.object
        key = cache_key(obj)
        # the last decoded copy: an object only ever cached undecoded is new to the handlers
        previous = self.cache.get(key)
        unread = self._raw.pop(key, None)
        if event.type == "DELETED":
            if previous is not None or unread is not None:
                self.cache.pop(key, None)
                await _call(self.on_delete, obj)
            return
        self.cache[key] = obj
        if previous is None:
            await _call(self.on_add, obj)
        else:
            await _call(self.on_update, previous, obj)


_UNSEEN = object()


async def _call(handler: Callable[..., object] | None, *args: object) -> None:
    if handler is None:
        return
    try:
        result = handler(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("informer handler %r failed", handler)


def _split(on_change: ChangeHandler[K]) -> tuple[Handler[K], UpdateHandler[K]]:
    """``on_change(new, old)`` as an addition handler and an update handler."""
    return (lambda obj: on_change(obj, None)), (lambda old, new: on_change(new, old))


def _chained(
    first: Callable[..., object] | None, then: Callable[..., object] | None
) -> Any:
    """One handler that calls ``first``, then ``then``; each failure is logged alone."""
    if first is None or then is None:
        return first or then

    async def both(*args: object) -> None:
        await _call(first, *args)
        await _call(then, *args)

    return both


@contextlib.asynccontextmanager
async def running(*informers: Informer[Any]) -> AsyncIterator[None]:
    """Run informers in the background for the duration of a block."""
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        for informer in informers:
            await informer.wait_synced()
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


_LIVE: weakref.WeakSet[Informer[Any]] = weakref.WeakSet()


class _InformerCollector(Collector):
    """Where each running informer of this process stands: the last revision it saw and how
    many objects it holds. Compared with the store, they say whether its watch caught up
    (the chaos soak checks this for every component)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["kind", "namespace", "informer"]
        revision = GaugeMetricFamily(
            "shoal_informer_revision",
            "The last store revision the informer saw (kind: api/plural)",
            labels=labels,
        )
        objects = GaugeMetricFamily(
            "shoal_informer_objects", "Objects in the informer's cache", labels=labels
        )
        for informer in sorted(_LIVE, key=lambda i: i.number):
            kind = f"{informer.kind.api_name()}/{informer.kind.plural}"
            values = [kind, informer.namespace or "", str(informer.number)]
            revision.add_metric(values, informer.revision)
            objects.add_metric(values, informer.count())
        yield revision
        yield objects


REGISTRY.register(_InformerCollector())
