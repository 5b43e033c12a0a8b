"""One list of a member cluster's objects kept current by a watch (the observer's nodes, CRDs).

List, then watch from the list's resourceVersion; when a stream ends, resume
from the last resourceVersion seen; re-list on 410 Gone, after a failure (the
list proves the cluster answers again) and, as a safety net against a
silently broken watch, every ``resync`` seconds.
Failures back off from ``retry`` to ``max_retry``. Every change of the
cache, every successful (re-)list and every failure calls ``on_change``;
``error`` holds the failure until the next successful list or event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

from shoal.client.kube import KubeApiError, KubeCluster, KubeUnreachable, compacted
from shoal.machinery.types import Obj

log = logging.getLogger(__name__)



@dataclass(eq=False)
class Reflector:
    """``items`` (name → object) of the list at ``path``, as the cluster has them now."""

    path: str
    get_kube: Callable[[], Awaitable[KubeCluster]]
    on_change: Callable[[], None]
    _: KW_ONLY
    resync: float = 60.0
    retry: float = 0.25
    max_retry: float = 10.0
    absent_ok: bool = False  # 403/404 on the list is an empty list (no CRD API, no rights)
    items: dict[str, Obj] = field(default_factory=dict, init=False)
    synced: bool = field(default=False, init=False)
    error: Exception | None = field(default=None, init=False)
    lists: int = field(default=0, init=False)  # (re-)lists done (tests, metrics)
    events: int = field(default=0, init=False)  # watch events applied

    async def run(self) -> None:
        """Until cancelled."""
        version: str | None = None
        listed_at = 0.0
        delay = self.retry
        while True:
            try:
                kube = await self.get_kube()
                if version is None or time.monotonic() - listed_at >= self.resync:
                    version = await self._list(kube)
                    listed_at = time.monotonic()
                    delay = self.retry
                if version == "":
                    await asyncio.sleep(self.resync)  # nothing to watch: look again later
                    version = None
                    continue
                left = max(1.0, self.resync - (time.monotonic() - listed_at))
                async with asyncio.timeout(left):
                    async for event in kube.watch(self.path, version, int(left) + 1):
                        version = self._apply(event) or version
                        delay = self.retry
            except TimeoutError:
                continue  # the safety-net re-list is due
            except asyncio.CancelledError:
                raise
            except (KubeApiError, KubeUnreachable) as error:
                version = None  # list again; after a failure it proves the cluster answers
                if not compacted(error):
                    await self._failed(error, delay)
                    delay = min(delay * 2, self.max_retry)

    async def _list(self, kube: KubeCluster) -> str:
        """A fresh cache; its resourceVersion ("" when the list does not exist here)."""
        try:
            data: Obj = await kube.request("GET", self.path)
        except KubeApiError as error:
            if not (self.absent_ok and error.status in (403, 404)):
                raise
            data = {"metadata": {"resourceVersion": ""}}
        self.lists += 1
        self.items = {
            str(item["metadata"]["name"]): item
            for item in data.get("items") or []
            if (item.get("metadata") or {}).get("name")
        }
        self.synced, self.error = True, None
        self.on_change()
        return str((data.get("metadata") or {}).get("resourceVersion") or "")

    def _apply(self, event: Obj) -> str | None:
        """One watch event into the cache; the resourceVersion it carries."""
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        kind = event.get("type")
        name = meta.get("name")
        if kind in ("ADDED", "MODIFIED") and name:
            self.items[str(name)] = obj
        elif kind == "DELETED" and name:
            self.items.pop(str(name), None)
        version = meta.get("resourceVersion")
        if kind == "BOOKMARK" or not name:
            return str(version) if version else None
        self.events += 1
        if self.error is not None:
            self.error = None
        self.on_change()
        return str(version) if version else None

    async def _failed(self, error: Exception, delay: float) -> None:
        log.debug("list/watch %s: %s (again in %.1f s)", self.path, error, delay)
        self.error = error
        self.on_change()
        await asyncio.sleep(delay)
