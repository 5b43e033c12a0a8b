"""Pods' status writes, many in one request (``POST /scheduling/podstatuses``).

A status per placed pod is most of what the fleet scheduler asks of the API;
written one by one it costs the API a request and a store commit per pod. The
writer gathers what the pipeline hands it for a moment (``LINGER``) and sends
up to ``MOST`` in one request; a pod's newest status replaces one not sent
yet. Nothing is dropped: an item that failed, or a batch the API did not
answer, is sent again with a back-off, unless the pod is gone (404).
"""

from __future__ import annotations

import asyncio
import logging

from shoal.client.rest import ApiError, ShoalClient, Unreachable
from shoal.machinery.backoff import Backoff
from shoal.machinery.types import Obj

log = logging.getLogger(__name__)
Key = tuple[str, str]
PATH = "/scheduling/podstatuses"
LINGER = 0.02  # seconds a first status waits for others to share its request
MOST = 500


class StatusWriter:
    def __init__(self, client: ShoalClient, in_flight: int) -> None:
        self.client = client
        self.pending: dict[Key, Obj] = {}
        self.slots = asyncio.Semaphore(max(1, in_flight))
        self.wake = asyncio.Event()
        self.written = 0
        self.requests = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def put(self, namespace: str, name: str, uid: str, status: Obj) -> None:
        self.pending[(namespace, name)] = {"namespace": namespace, "name": name, "uid": uid,
                                           "status": status}
        self.wake.set()

    async def run(self) -> None:
        """Send what is pending, for ever (several requests in flight at once)."""
        try:
            while True:
                await self.wake.wait()
                await asyncio.sleep(LINGER)
                await self.slots.acquire()
                items = self._take()
                if not items:
                    self.slots.release()
                    continue
                task = asyncio.create_task(self._send(items))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            for task in list(self._tasks):
                task.cancel()

    def _take(self) -> list[Obj]:
        keys = list(self.pending)[:MOST]
        items = [self.pending.pop(k) for k in keys]
        if not self.pending:
            self.wake.clear()
        return items

    async def _send(self, items: list[Obj]) -> None:
        backoff = Backoff(0.2, 5.0)
        try:
            while items:
                again: list[Obj] = []
                try:
                    self.requests += 1
                    answer = await self.client.request("POST", PATH, body={"items": items})
                    for item, result in zip(items, answer["results"], strict=True):
                        if result["status"] == 200:
                            self.written += 1
                        elif result["status"] != 404:  # 404: deleted, nobody waits for it
                            again.append(item)
                except (ApiError, Unreachable, OSError) as error:  # the API is away: keep them
                    log.warning("status of %d pods: %s; retrying", len(items), error)
                    again = items
                # a newer status handed over meanwhile wins over a failed older one
                items = [i for i in again if (i["namespace"], i["name"]) not in self.pending]
                if items:
                    await asyncio.sleep(backoff.failed())
        finally:
            self.slots.release()
