"""The work queue of keys, shaped like client-go's rate-limiting queue: deduplicated,
delayable, one worker per key, a back-off per failing key.

- A key added while queued is not queued twice.
- A key added while a worker holds it is queued again when the worker is done,
  so no change is lost and no key is processed by two workers at once.
- ``add_after`` keeps the earliest deadline of a key: a later request never
  postpones an earlier one (a stream of events cannot starve a timer), unless it
  says it ``replace``s it.
- An added key wakes one idle worker, not all of them (a scheduler runs 256), and
  one idle worker at a time waits for the earliest timer.
- Ready keys come first come first served, or, given a ``priority``, lowest first.
- ``add_rate_limited`` adds a key that failed after its own back-off, longer with each
  failure in a row; ``forget`` (on success) starts its next failure at the base again.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from shoal.machinery.backoff import Backoff

T = TypeVar("T", bound=Hashable)


#: client-go's default per-item back-off: 5 ms doubling up to 1000 s.
DEFAULT_BASE = 0.005
DEFAULT_CAP = 1000.0


class _Ready(Protocol[T]):
    def append(self, key: T, /) -> None: ...
    def popleft(self) -> T: ...
    def __len__(self) -> int: ...


class _ByPriority(Generic[T]):
    """Ready keys by ``priority(key)`` as it was when each was added, lowest first;
    equal ones first come first."""

    def __init__(self, priority: Callable[[T], Any]) -> None:
        self._priority = priority
        self._heap: list[tuple[Any, int, T]] = []
        self._seq = itertools.count()

    def append(self, key: T) -> None:
        heapq.heappush(self._heap, (self._priority(key), next(self._seq), key))

    def popleft(self) -> T:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)


class WorkQueue(Generic[T]):
    """``backoff``: the delays of ``add_rate_limited``; ``clock``: monotonic seconds (a
    test gives its own to read deadlines without waiting for them); ``priority``: the
    order of ready keys (first come first without it)."""

    def __init__(self, backoff: Backoff | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 priority: Callable[[T], Any] | None = None) -> None:
        self.backoff = backoff or Backoff(DEFAULT_BASE, DEFAULT_CAP)
        self._clock = clock
        self._failures: dict[T, int] = {}
        self._ready: _Ready[T] = deque() if priority is None else _ByPriority(priority)
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
        when = self._clock() + delay
        current = self._deadline.get(key)
        if current is not None and current <= when and not replace:
            return
        self._deadline[key] = when
        heapq.heappush(self._timers, (when, next(self._seq), key))
        if self._armed is None or when < self._armed:
            self._wake_one()  # it waits for this earlier deadline instead

    def add_rate_limited(self, key: T) -> float:
        """``key`` failed once more: add it after its back-off; the delay it waits."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = self.backoff.delay(failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: T) -> None:
        """``key`` succeeded (or was given up): its next failure waits the base again."""
        self._failures.pop(key, None)

    def failures(self, key: T) -> int:
        """Failures of ``key`` in a row since it was last forgotten."""
        return self._failures.get(key, 0)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def deadline(self, key: T) -> float | None:
        """Clock time of the key's pending delayed add, if any."""
        return self._deadline.get(key)

    def pending(self, key: T) -> bool:
        """``key`` is ready or waits for its time (not counting a worker holding it)."""
        return key in self._queued or key in self._deadline

    def cancel(self, key: T) -> None:
        """Drop the key's pending delayed add and its failures (the object is gone). A
        ready key stays ready: its worker finds the object gone."""
        self._deadline.pop(key, None)
        self._failures.pop(key, None)

    def _release_timers(self) -> float | None:
        now = self._clock()
        while self._timers and self._timers[0][0] <= now:
            when, _, key = heapq.heappop(self._timers)
            if self._deadline.get(key) == when:
                del self._deadline[key]
                self.add(key)
        while self._timers and self._deadline.get(self._timers[0][2]) != self._timers[0][0]:
            heapq.heappop(self._timers)  # superseded by an earlier deadline
        return self._timers[0][0] - now if self._timers else None

    def get_nowait(self) -> T | None:
        """The next ready key, if one is ready now (for a taker filling a batch)."""
        self._release_timers()
        return self._pop() if self._ready else None

    def _pop(self) -> T:
        key = self._ready.popleft()
        self._queued.discard(key)
        self._processing.add(key)
        if self._ready or (self._timers and self._armed is None):
            self._wake_one()  # more work, or timers no idle worker waits for
        return key

    async def get(self) -> T:
        """The next key to process; call ``done(key)`` when finished with it."""
        while True:
            wait = self._release_timers()
            if self._ready:
                return self._pop()
            if self._closed:
                raise asyncio.CancelledError
            deadline = None
            if wait is not None:
                deadline = self._clock() + wait
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
