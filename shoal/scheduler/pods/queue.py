"""The sampling queue: ready pods in sort-plugin order, pods on back-off, and nothing twice.

A key is in at most one place: ready (the heap), waiting (a timer), or
taken by a pipeline. Deleted pods are dropped lazily when they come up.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Any

from shoal.model.pods import Pod
from shoal.scheduler.pods.work import Key, PodWork

SortKey = Callable[[PodWork], Any]


class PodQueue:
    def __init__(self, sort_key: SortKey) -> None:
        self.sort_key = sort_key
        self._heap: list[tuple[Any, int, Key]] = []
        self._items: dict[Key, PodWork] = {}
        self._places: dict[Key, str] = {}  # ready, waiting or taken
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._seq = itertools.count()
        self._ready = asyncio.Event()
        self._turn = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._places)

    def add(self, work: PodWork) -> None:
        """Ready now, unless it is already queued or taken (then only its object is refreshed)."""
        key = work.key
        known = self._items.get(key)
        if known is not None:
            known.pod = work.pod  # keep its attempts and back-off
            return
        self._items[key] = work
        self._push(key)

    def refresh(self, key: Key, pod: Pod) -> bool:
        """Give a queued or taken pod its newest object; False when ``key`` is not here."""
        known = self._items.get(key)
        if known is None:
            return False
        known.pod = pod
        return True

    def add_after(self, work: PodWork, delay: float) -> None:
        key = work.key
        self._items[key] = work
        self._places[key] = "waiting"
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._wake, key)

    def done(self, key: Key) -> None:
        """A pipeline finished with ``key`` (placed, failed or re-queued with ``add_after``)."""
        if self._places.get(key) == "taken":
            del self._places[key]
            self._items.pop(key, None)

    def remove(self, key: Key) -> None:
        self._items.pop(key, None)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if self._places.get(key) != "taken":
            self._places.pop(key, None)

    def _wake(self, key: Key) -> None:
        self._timers.pop(key, None)
        if self._places.get(key) == "waiting":
            del self._places[key]
            if key in self._items:
                self._push(key)

    def _push(self, key: Key) -> None:
        self._places[key] = "ready"
        heapq.heappush(self._heap, (self.sort_key(self._items[key]), next(self._seq), key))
        self._ready.set()

    async def take(self, most: int, linger: float = 0.0) -> list[PodWork]:
        """Up to ``most`` ready pods, best first; waits for at least one, then up to
        ``linger`` seconds for a fuller batch. Takers take turns, so pods that come in
        while one lingers go to its batch: a few large requests to the agents rather than
        many small ones, which cost the agents and this scheduler far more per pod."""
        async with self._turn:
            while not self._heap:
                self._ready.clear()
                await self._ready.wait()
            if linger and len(self._heap) < most:
                await asyncio.sleep(linger)
            return await self._take(most)

    async def _take(self, most: int) -> list[PodWork]:
        while True:
            taken: list[PodWork] = []
            while self._heap and len(taken) < most:
                _, _, key = heapq.heappop(self._heap)
                work = self._items.get(key)
                if work is None or self._places.get(key) != "ready":
                    continue
                self._places[key] = "taken"
                taken.append(work)
            if not self._heap:
                self._ready.clear()
            if taken:
                return taken
            await self._ready.wait()
