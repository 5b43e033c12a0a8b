"""Writes of concurrent callers go out in batches: one request, one store commit for many.

Each caller awaits its own item; items that arrive while a batch is in flight
wait for the next one, so under load a request carries hundreds of items and
when idle a lone item leaves at once. The batch routes answer one result per
item (``status`` 200 with the new ``resource_version``, or a problem), which
becomes each caller's return value or the API error of its item.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from shoal.client.rest import error_for

Send = Callable[[list[dict[str, Any]]], Awaitable[Sequence[dict[str, Any]]]]


class Batcher:
    """Sends the JSON items of concurrent callers through ``send`` (a batch route call)."""

    def __init__(self, send: Send, *, max_batch: int = 500, in_flight: int = 2) -> None:
        self.send = send
        self.max_batch = max_batch
        self._pending: list[tuple[dict[str, Any], asyncio.Future[int]]] = []
        self._slots = asyncio.Semaphore(in_flight)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.requests = 0
        self.written = 0

    async def write(self, item: dict[str, Any]) -> int:
        """Write one item; its object's new resource_version, or the API's error for it."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._send_loop())
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self._wake.set()
        return await future

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                await self._slots.acquire()
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                asyncio.create_task(self._send(batch))

    async def _send(self, batch: list[tuple[dict[str, Any], asyncio.Future[int]]]) -> None:
        try:
            self.requests += 1
            results = await self.send([item for item, _ in batch])
        except BaseException as error:  # every waiting caller must learn the outcome
            for _, future in batch:
                if not future.done():
                    future.set_exception(error if isinstance(error, Exception) else RuntimeError())
            if not isinstance(error, Exception):
                raise
            return
        finally:
            self._slots.release()
        result: dict[str, Any]
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if result.get("status") == 200:
                self.written += 1
                future.set_result(int(result["resource_version"]))
            else:
                problem: dict[str, Any] = {
                    "title": result.get("title", ""),
                    "detail": result.get("detail", ""),
                }
                future.set_exception(error_for(int(result.get("status", 500)), problem))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
