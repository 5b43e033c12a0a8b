"""Watch helpers of the API tests (their plain httpx client is ``http``, tests/conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson


@dataclass
class Watch:
    """Lines of one watch stream, collected in the background."""

    events: list[dict[str, Any]] = field(default_factory=list)
    heartbeats: int = 0
    status: int | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def revisions(self) -> list[int]:
        return [int(e["object"]["metadata"]["resource_version"]) for e in self.events]

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


async def start_watch(http: httpx.AsyncClient, path: str, **params: Any) -> Watch:
    """Open ``path?watch`` and collect its events until stopped; returns once headers arrived."""
    watch = Watch()
    query = {"watch": "", **params}

    async def run() -> None:
        try:
            async with http.stream("GET", path, params=query, timeout=None) as response:
                watch.status = response.status_code
                watch.started.set()
                if response.status_code != 200:
                    await response.aread()
                    return
                async for line in response.aiter_lines():
                    if not line:
                        watch.heartbeats += 1
                        continue
                    watch.events.append(orjson.loads(line))
        finally:
            watch.started.set()
            watch.ended.set()

    watch.task = asyncio.create_task(run())
    await asyncio.wait_for(watch.started.wait(), 10)
    return watch
