"""A work queue of keys, shaped like client-go's: deduplicated, delayable, one worker per key.

- A key added while queued is not queued twice.
- A key added while a worker holds it is queued again when the worker is done,
  so no change is lost and no key is processed by two workers at once.
- ``add_after`` keeps the earliest deadline of a key: a later request never
  postpones an earlier one (a stream of events cannot starve a timer), unless it
  says it ``replace``s it.
- An added key wakes one idle worker, not all of them (a scheduler runs 256), and
  one idle worker at a time waits for the earliest timer.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class WorkQueue(Generic[T]):
    def __init__(self) -> None:
        self._ready: deque[T] = deque()
        self._queued: set[T] = set()
        self._processing: set[T] = set()
        self._dirty: set[T] = set()
        self._timers: list[tuple[float, int, T]] = []
        self._deadline: dict[T, float] = {}
        self._seq = itertools.count()
        self._waiters: deque[asyncio.Future[None]] = deque()  # idle workers, first come first
        self._armed: float | None = None  # the timer deadline an idle worker waits for
        self._closed = False

    def __len__(self) -> int:
        return len(self._ready)

    @property
    def waiting(self) -> int:
        return len(self._deadline)

    @property
    def in_progress(self) -> int:
        """Keys a worker holds now."""
        return len(self._processing)

    def add(self, key: T) -> None:
        if self._closed:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._ready.append(key)
        self._wake_one()

    def add_after(self, key: T, delay: float, *, replace: bool = False) -> None:
        """Add ``key`` in ``delay`` seconds, unless it already waits for an earlier time.

        ``replace``: this delay replaces the pending one, even an earlier one. For a
        worker that just brought its key to rest: what it waited for then is done.
        """
        if delay <= 0:
            self.add(key)
            return
        when = time.monotonic() + delay
        current = self._deadline.get(key)
        if current is not None and current <= when and not replace:
            return
        self._deadline[key] = when
        heapq.heappush(self._timers, (when, next(self._seq), key))
        if self._armed is None or when < self._armed:
            self._wake_one()  # it waits for this earlier deadline instead

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def deadline(self, key: T) -> float | None:
        """Monotonic time of the key's pending delayed add, if any."""
        return self._deadline.get(key)

    def _release_timers(self) -> float | None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            when, _, key = heapq.heappop(self._timers)
            if self._deadline.get(key) == when:
                del self._deadline[key]
                self.add(key)
        while self._timers and self._deadline.get(self._timers[0][2]) != self._timers[0][0]:
            heapq.heappop(self._timers)  # superseded by an earlier deadline
        return self._timers[0][0] - now if self._timers else None

    async def get(self) -> T:
        """The next key to process; call ``done(key)`` when finished with it."""
        while True:
            wait = self._release_timers()
            if self._ready:
                key = self._ready.popleft()
                self._queued.discard(key)
                self._processing.add(key)
                if self._ready or (self._timers and self._armed is None):
                    self._wake_one()  # more work, or timers no idle worker waits for
                return key
            if self._closed:
                raise asyncio.CancelledError
            deadline = None
            if wait is not None:
                deadline = time.monotonic() + wait
                if self._armed is not None and self._armed <= deadline:
                    deadline = None  # another idle worker waits for the timers
                else:
                    self._armed = deadline
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:  # asyncio.timeout, not wait_for: no task made per wait
                async with asyncio.timeout(wait if deadline is not None else None):
                    await waiter
            except TimeoutError:
                pass
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken for a key it will not take: pass it on
                raise
            finally:
                if not waiter.done():
                    waiter.cancel()
                if deadline is not None and self._armed == deadline:
                    self._armed = None

    def done(self, key: T) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
