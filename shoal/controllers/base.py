"""What every controller shares: background tasks, run until cancelled, a clean stop.

A controller spawns its informers and workers in ``start()`` through
``spawn``/``start_informers``/``spawn_workers``; each worker is ``work`` on its
queue, which ``stop()`` closes. ``run()`` starts it and waits until cancelled
or until one of its tasks fails, and always stops it. Subclasses extend
``stop()`` for their own clean-up (clients, recorders) and call ``super()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from typing import Any, TypeVar

from shoal.client.informer import Informer
from shoal.machinery.tasks import cancel_and_wait
from shoal.machinery.workqueue import WorkQueue

T = TypeVar("T", bound=Hashable)


class Controller:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[Any]] = []
        self._queues: list[WorkQueue[Any]] = []

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(work)
        self._tasks.append(task)
        return task

    async def start_informers(self, *informers: Informer[Any]) -> None:
        """Run informers in the background and return once each has listed."""
        for informer in informers:
            self.spawn(informer.run())
        for informer in informers:
            await informer.wait_synced()

    def spawn_workers(
        self,
        count: int,
        queue: WorkQueue[T],
        handle: Callable[[T], Awaitable[None]],
        failed: Callable[[T, Exception], None],
    ) -> None:
        """``count`` workers (``work``) on ``queue``; ``stop()`` closes it, then cancels them."""
        self._queues.append(queue)
        for _ in range(count):
            self.spawn(self.work(queue, handle, failed))

    async def work(
        self,
        queue: WorkQueue[T],
        handle: Callable[[T], Awaitable[None]],
        failed: Callable[[T, Exception], None],
    ) -> None:
        """One worker: take each key from ``queue`` and ``handle`` it, for ever.

        When handling fails, ``failed`` (called inside the ``except``, so it can
        ``log.exception``) decides how to retry; the key is marked done either way.
        """
        while True:
            key = await queue.get()
            try:
                await handle(key)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a worker's top level: log, retry later
                failed(key, error)
            finally:
                queue.done(key)

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        queues, self._queues = self._queues, []
        for queue in queues:
            queue.close()
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)

    async def run(self) -> None:
        """Run until cancelled (or a task fails), then stop."""
        try:
            await self.start()
            await asyncio.gather(*self._tasks)
        finally:
            await self.stop()
