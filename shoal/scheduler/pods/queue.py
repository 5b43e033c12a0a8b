"""The sampling queue: the machinery's work queue ordered by the sort plugin, in batches.

A key is in at most one place: ready, waiting (a timer), or taken by a pipeline.
A pod added while queued or taken only refreshes its object: the pipeline that
holds it decides whether it goes round again. Deleted pods are dropped lazily
when they come up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from shoal.machinery.workqueue import WorkQueue
from shoal.model.pods import Pod
from shoal.scheduler.pods.work import Key, PodWork

SortKey = Callable[[PodWork], Any]


class PodQueue:
    def __init__(self, sort_key: SortKey) -> None:
        self.sort_key = sort_key
        self._items: dict[Key, PodWork] = {}
        self._queue: WorkQueue[Key] = WorkQueue(priority=self._priority)
        self._turn = asyncio.Lock()

    def _priority(self, key: Key) -> Any:
        return self.sort_key(self._items[key])

    def __len__(self) -> int:
        return len(self._items)

    def add(self, work: PodWork) -> None:
        """Ready now, unless it is already queued or taken (then only its object is refreshed)."""
        key = work.key
        known = self._items.get(key)
        if known is not None:
            known.pod = work.pod  # keep its attempts and back-off
            return
        self._items[key] = work
        self._queue.add(key)

    def refresh(self, key: Key, pod: Pod) -> bool:
        """Give a queued or taken pod its newest object; False when ``key`` is not here."""
        known = self._items.get(key)
        if known is None:
            return False
        known.pod = pod
        return True

    def add_after(self, work: PodWork, delay: float) -> None:
        """A taken pod goes round again in ``delay`` seconds (this delay, not an earlier one)."""
        self._items[work.key] = work
        self._queue.add_after(work.key, delay, replace=True)

    def done(self, key: Key) -> None:
        """A pipeline finished with ``key`` (placed, failed or re-queued with ``add_after``)."""
        self._queue.done(key)
        if not self._queue.pending(key):
            self._items.pop(key, None)

    def remove(self, key: Key) -> None:
        self._items.pop(key, None)
        self._queue.cancel(key)

    def _taken(self, key: Key | None) -> PodWork | None:
        """The work of a key just taken; a deleted pod's key is let go."""
        if key is None:
            return None
        work = self._items.get(key)
        if work is None:
            self._queue.done(key)
        return work

    async def take(self, most: int, linger: float = 0.0) -> list[PodWork]:
        """Up to ``most`` ready pods, best first; waits for at least one, then up to
        ``linger`` seconds for a fuller batch. Takers take turns, so pods that come in
        while one lingers go to its batch: a few large requests to the agents rather than
        many small ones, which cost the agents and this scheduler far more per pod."""
        async with self._turn:
            first = None
            while first is None:
                first = self._taken(await self._queue.get())
            taken = [first]
            if linger and len(self._queue) < most - 1:
                await asyncio.sleep(linger)
            while len(taken) < most:
                key = self._queue.get_nowait()
                if key is None:
                    break
                work = self._taken(key)
                if work is not None:
                    taken.append(work)
            return taken
