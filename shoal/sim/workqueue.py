"""One cluster's work queue: store events enqueue keys, one worker task handles them.

Items are tuples whose first element names the handler; a repeated item is
queued once. Timers enqueue items later (pod start, job completion). When the
queue runs dry the worker asks ``refill`` for more (the scheduler's retries of
unschedulable pods), so nothing ever loops over all objects on a timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from shoal.sim.store import ApiError

log = logging.getLogger(__name__)

Item = tuple[str, ...]


class WorkQueue:
    def __init__(self, name: str, handle: Callable[[Item], None],
                 refill: Callable[[], bool]) -> None:
        self.name = name
        self._handle = handle
        self._refill = refill
        self._queue: dict[Item, None] = {}
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._timers: set[asyncio.TimerHandle] = set()

    def start(self) -> None:
        """Start the worker on the running loop (idempotent)."""
        if self._worker is None or self._worker.done():
            self._wake = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._run())
            if self._queue:
                self._wake.set()

    async def stop(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def add(self, *item: str) -> None:
        self._queue[item] = None
        self.wake()

    def later(self, delay: float, *item: str) -> None:
        """Add ``item`` after ``delay`` seconds (needs a running loop)."""
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self.add(*item)

        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._timers.add(handle)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            done = 0
            while self._queue or self._refill():
                item = next(iter(self._queue))
                del self._queue[item]
                try:
                    self._handle(item)
                except ApiError as exc:
                    log.debug("sim %s: %s: %s", self.name, item, exc.message)
                except Exception:
                    log.exception("sim %s: controller failed on %s", self.name, item)
                done += 1
                if done % 200 == 0:
                    await asyncio.sleep(0)
