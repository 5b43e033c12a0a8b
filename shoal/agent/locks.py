"""One lock per node, made on first use and dropped when nobody holds or waits for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class NodeBusy(Exception):
    """The node's lock was not free within the timeout."""


class NodeLocks:
    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, node: str, timeout: float) -> AsyncIterator[None]:
        lock, users = self._locks.get(node) or (asyncio.Lock(), 0)
        self._locks[node] = (lock, users + 1)
        try:
            if lock.locked():  # a wait (``wait_for`` costs a task: only when there is one)
                try:
                    await asyncio.wait_for(lock.acquire(), timeout)
                except TimeoutError:
                    raise NodeBusy(node) from None
            else:
                await lock.acquire()  # free: taken at once, without yielding
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[node]
            if users > 1:
                self._locks[node] = (lock, users - 1)
            else:
                del self._locks[node]
