"""The event recorder: components say what happened in one call that never waits.

``emit`` only touches a dict: repeats of one event (same object, reason and
message key) between two flushes become one item with a count. A background
task sends what gathered every ``interval`` seconds (sooner when a batch is
full) through ``POST /core/events``, one request and one store commit per
thousand events, with at most one request in flight, so a burst of placements
costs a few large writes rather than one small write each. When the API cannot
be reached the items wait for the next flush (up to ``max_pending``; beyond
that new ones are dropped and counted): events are a record, never a reason
for the emitter to slow down or fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shoal.client.rest import ApiError, ShoalClient, Unreachable
from shoal.events import metrics
from shoal.machinery.tasks import cancel_and_wait
from shoal.model.base import Kind, utcnow
from shoal.model.events import DEFAULT_TTL, KIND_LABEL, NAME_LABEL, UID_LABEL, EventType

log = logging.getLogger(__name__)

__all__ = ["KIND_LABEL", "NAME_LABEL", "UID_LABEL", "Recorder", "event_name", "involved"]

PATH = "/core/events"
MAX_BATCH = 1000  # the API's limit per request


@dataclass(slots=True)
class _Pending:
    """One event's occurrences since the last flush."""

    body: dict[str, Any]
    count: int
    first: datetime
    last: datetime


def event_name(obj: Kind, reason: str, key: str, component: str) -> str:
    """A stable name: the same occurrence from any replica names the same stored event."""
    meta = obj.metadata
    return name_of(obj.kind, meta.name, meta.uid, reason, key, component)


def name_of(kind: str, name: str, uid: str | None, reason: str, key: str, component: str) -> str:
    """``event_name`` from the object's kind, name and uid (for writers without a model)."""
    ident = "\0".join((kind, uid or name, reason, key, component))
    digest = hashlib.blake2b(ident.encode(), digest_size=8).hexdigest()
    return f"{name[:46].rstrip('-_') or name[:1]}-{digest}"  # "_" is a name, "-…" none


def involved(obj: Kind) -> dict[str, Any]:
    meta = obj.metadata
    return {
        "api": obj.api,
        "kind": obj.kind,
        "namespace": meta.namespace,
        "name": meta.name,
        "uid": meta.uid,
    }


class Recorder:
    """Events of one component, gathered and written in batches.

    ``client`` None (or ``enabled`` False) records nothing: a component built
    without an API (a unit test, a dry run) emits into the void at no cost.
    """

    def __init__(
        self,
        client: ShoalClient | None,
        component: str,
        *,
        interval: float = 1.0,
        ttl: float = DEFAULT_TTL,
        max_pending: int = 50_000,
        enabled: bool = True,
    ) -> None:
        self.client = client
        self.component = component
        self.interval = interval
        self.ttl = ttl
        self.max_pending = max_pending
        self.enabled = enabled and client is not None
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._full = asyncio.Event()
        self._sending = asyncio.Lock()  # one request in flight
        self._last: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self._emitted = metrics.EMITTED.labels(component)
        self._emits = 0
        self._warned = -60.0
        self._dropped = metrics.DROPPED.labels(component)

    # the one call components make ---------------------------------------------------

    def emit(
        self,
        obj: Kind,
        reason: str,
        message: str,
        *,
        type: EventType = "Normal",
        key: str | None = None,
    ) -> None:
        """Record that ``reason`` happened to ``obj``; returns at once.

        Occurrences with the same ``key`` (default: the message) are one event
        whose count grows and whose message is the latest; give a ``key`` when
        the message carries changing numbers (retry k/n).
        """
        if not self.enabled:
            return
        self._emits += 1  # added to the counter at each flush (an inc costs a lock)
        name = event_name(obj, reason, message if key is None else key, self.component)
        namespace = obj.metadata.namespace or "default"
        now = utcnow()
        pending = self._pending.get((namespace, name))
        if pending is not None:
            pending.count += 1
            pending.last = now
            pending.body["message"] = message
            pending.body["type"] = type
        elif len(self._pending) >= self.max_pending:
            self._dropped.inc()
            return
        else:
            body = {
                "api": "core",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},  # the API labels it
                "involved_object": involved(obj),
                "reason": reason,
                "message": message[:4096],
                "reporting_component": self.component,
                "type": type,
            }
            self._pending[(namespace, name)] = _Pending(body, 1, now, now)
            if len(self._pending) == MAX_BATCH:
                self._full.set()
            if self._task is None or self._task.done():
                self._ensure_task()

    def changed(self, obj: Kind, topic: str, value: str) -> bool:
        """Whether ``value`` differs from the last one seen for ``obj`` and ``topic``.

        A controller working from a cache may act twice on the same change (its
        own write not seen yet); this tells a new transition from a repeat.
        """
        key = (obj.metadata.uid or obj.metadata.name, topic)
        if self._last.get(key) == value:
            return False
        self._last[key] = value
        self._last.move_to_end(key)
        if len(self._last) > self.max_pending:
            self._last.popitem(last=False)
        return True

    # flushing ----------------------------------------------------------------------

    def _ensure_task(self) -> None:
        try:
            self._task = asyncio.get_running_loop().create_task(self._run())
        except RuntimeError:  # no loop yet: the next emit inside one starts it
            self._task = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), self.interval)
            self._full.clear()
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:  # a background task's top level: log, try next time
                log.exception("writing events failed")

    def _take(self) -> list[_Pending]:
        keys = list(self._pending)[:MAX_BATCH]
        return [self._pending.pop(k) for k in keys]

    async def flush(self) -> int:
        """Send everything gathered so far; how many events this call wrote."""
        async with self._sending:
            return await self._send_all()

    async def _send_all(self) -> int:
        self._emitted.inc(self._emits)
        self._emits = 0
        written = 0
        while self._pending and self.client is not None:
            batch = self._take()
            items = [self._item(p) for p in batch]
            start = time.perf_counter()
            try:
                answer = await self.client.request("POST", PATH, body={"events": items})
            except asyncio.CancelledError:
                self._put_back(batch)  # close() writes them
                raise
            except (Unreachable, ApiError) as error:
                metrics.FLUSH_ERRORS.labels(self.component).inc()
                status = error.status if isinstance(error, ApiError) else 0
                refused = 400 <= status < 500 and status != 429  # not allowed, not valid
                if refused:
                    self._dropped.inc(sum(p.count for p in batch))
                else:
                    self._put_back(batch)
                if time.monotonic() - self._warned > 60:  # one line a minute, not a flood
                    self._warned = time.monotonic()
                    what = "dropped" if refused else "not written yet"
                    log.warning("events: %d %s (%s)", len(batch), what, error)
                return written
            finally:
                metrics.FLUSH_SECONDS.labels(self.component).observe(time.perf_counter() - start)
            ok = 0
            for result in answer["results"]:
                if result.get("status") == 200:
                    ok += 1
                else:
                    self._dropped.inc()
                    log.debug("event %s refused: %s", result.get("name"), result.get("detail"))
            metrics.WRITTEN.labels(self.component).inc(ok)
            written += ok
        return written

    def _item(self, pending: _Pending) -> dict[str, Any]:
        """The event as the request carries it (its moments spelled by the request's orjson)."""
        item = dict(pending.body)
        item["count"] = pending.count
        item["first_timestamp"] = pending.first
        item["last_timestamp"] = pending.last
        item["expires"] = pending.last + timedelta(seconds=self.ttl)
        return item

    def _put_back(self, batch: list[_Pending]) -> None:
        """Failed items wait for the next flush, merged with what arrived meanwhile."""
        for old in batch:
            meta = old.body["metadata"]
            key = (meta["namespace"], meta["name"])
            newer = self._pending.get(key)
            if newer is not None:
                newer.count += old.count
                newer.first = min(newer.first, old.first)
            elif len(self._pending) < self.max_pending:
                self._pending[key] = old
            else:
                self._dropped.inc()

    async def close(self) -> None:
        """Stop the background task and write what is left (best effort)."""
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):  # a stopping component does not wait on a dead API
                await self.flush()
