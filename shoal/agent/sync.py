"""List+watch of the member cluster's nodes and pods into the node cache.

One ``ListWatch`` per kind: list, then watch from the list's resourceVersion;
after a disconnect resume from the last resourceVersion seen, and list again
when the cluster answers 410 Gone or after an unexpected failure. ``live``
tells whether both watches are connected, so that the agent can
refuse to commit on a cache that may be stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from shoal.agent.cache import NodeCache
from shoal.client.kube import KubeApiError, KubeCluster, KubeUnreachable
from shoal.machinery.listwatch import ListWatch
from shoal.machinery.types import Obj

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Feed:
    """One kind the cache follows: where to list it and how to apply what arrives."""

    kind: str
    path: str
    replace: Callable[[list[Obj], int | None], None]
    set: Callable[[Obj], None]
    delete: Callable[[Obj], None]


def feeds(cache: NodeCache) -> list[Feed]:
    return [
        Feed("nodes", "/api/v1/nodes", lambda items, _: cache.replace_nodes(items),
             cache.set_node, cache.delete_node),
        Feed("pods", "/api/v1/pods", cache.replace_pods, cache.set_pod, cache.delete_pod),
    ]


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


@dataclass
class ClusterSync:
    kube: KubeCluster
    cache: NodeCache
    timeout_seconds: int = 300
    retry: float = 0.2  # first delay after a failure; doubles up to max_retry
    max_retry: float = 5.0
    live: set[str] = field(default_factory=set)  # kinds whose watch is connected
    lists: int = 0
    feeds: list[Feed] = field(init=False)
    _listed: set[str] = field(default_factory=set)
    _first: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.feeds = feeds(self.cache)

    @property
    def synced(self) -> bool:
        return len(self.live) == len(self.feeds)

    @property
    def listed(self) -> bool:
        return self._first.is_set()

    async def start(self, wait: float | None = 10.0) -> None:
        """Start following; wait up to ``wait`` seconds for the first complete list."""
        self._tasks = [asyncio.create_task(self._follow(feed)) for feed in self.feeds]
        if wait:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first.wait(), wait)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self.live.clear()

    async def _follow(self, feed: Feed) -> None:
        async def list_() -> str:
            listed: Obj = await self.kube.request("GET", feed.path)
            version = str((listed.get("metadata") or {}).get("resourceVersion") or "0")
            feed.replace(list(listed.get("items") or ()), _int(version))
            self.lists += 1
            self._listed.add(feed.kind)
            if len(self._listed) == len(self.feeds):
                self._first.set()
            return version

        async def events(version: str) -> AsyncIterator[str]:
            self.live.add(feed.kind)
            async for event in self.kube.watch(feed.path, version, self.timeout_seconds):
                obj = event.get("object") or {}
                kind = event.get("type")
                if kind in ("ADDED", "MODIFIED"):
                    feed.set(obj)
                elif kind == "DELETED":
                    feed.delete(obj)
                yield str((obj.get("metadata") or {}).get("resourceVersion") or version)

        def failed(error: Exception) -> bool:
            """Not live until the watch resumes; list again after a surprise."""
            self.live.discard(feed.kind)
            if isinstance(error, KubeApiError):
                log.info("watch %s: %s", feed.kind, error)
            elif isinstance(error, KubeUnreachable):
                log.debug("watch %s: %s", feed.kind, error)
            else:
                log.error("watch %s failed; listing again", feed.kind, exc_info=error)
                return True
            return False

        def compacted(error: Exception) -> bool:
            if isinstance(error, KubeApiError) and error.status == 410:
                self.live.discard(feed.kind)
                return True
            return False

        await ListWatch(
            list_, events, compacted=compacted, failed=failed,
            retry=self.retry, max_retry=self.max_retry,
        ).run()
