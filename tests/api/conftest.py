"""Fixtures of the API tests: a plain httpx client (no Shoal client code) and watch helpers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from shoal.api.server import ApiServer
from shoal.testing import shipped


@pytest.fixture
async def http(api: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    """A bare HTTP client on the API, as any Krake script would use, with the
    administrator's token."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    headers = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
    async with httpx.AsyncClient(
        base_url=api.url, timeout=30, limits=limits, headers=headers
    ) as c:
        yield c


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
