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

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

from shoal.client.kube import KubeApiError, KubeCluster, compacted
from shoal.machinery.listwatch import ListWatch
from shoal.machinery.types import Obj

log = logging.getLogger(__name__)


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _whole(obj: Obj) -> Obj | None:
    return obj


@dataclass(eq=False)
class Reflector:
    """``items`` (key → object) of the list at ``path``, as the cluster has them now.

    ``key`` names an item (its name; ``namespace/name`` for namespaced lists);
    ``keep`` is what is kept of it (None: nothing, as if it were not there). An
    event that changes nothing kept wakes no one.
    """

    path: str
    get_kube: Callable[[], Awaitable[KubeCluster]]
    on_change: Callable[[], None]
    _: KW_ONLY
    resync: float = 60.0
    retry: float = 0.25
    max_retry: float = 10.0
    absent_ok: bool = False  # 403/404 on the list is an empty list (no CRD API, no rights)
    key: Callable[[Obj], str] = _name
    keep: Callable[[Obj], Obj | None] = _whole
    items: dict[str, Obj] = field(default_factory=dict, init=False)
    synced: bool = field(default=False, init=False)
    error: Exception | None = field(default=None, init=False)
    lists: int = field(default=0, init=False)  # (re-)lists done (tests, metrics)
    events: int = field(default=0, init=False)  # watch events applied
    changes: int = field(default=0, init=False)  # lists, failures and events that changed items

    async def run(self) -> None:
        """Until cancelled."""
        loop = ListWatch(
            self._list,
            self._events,
            compacted=compacted,
            failed=self._failed,
            retry=self.retry,
            max_retry=self.max_retry,
            resync=self.resync,
        )
        await loop.run()

    async def _events(self, version: str) -> AsyncIterator[str]:
        kube = await self.get_kube()
        # the server's own limit, past the loop's resync timer, which cuts the watch first
        async for event in kube.watch(self.path, version, int(self.resync) + 1):
            version = self._apply(event) or version
            yield version

    async def _list(self) -> str | None:
        """A fresh cache; its resourceVersion (None when the list does not exist here)."""
        kube = await self.get_kube()
        try:
            data: Obj = await kube.request("GET", self.path)
        except KubeApiError as error:
            if not (self.absent_ok and error.status in (403, 404)):
                raise
            data = {"metadata": {"resourceVersion": ""}}
        self.lists += 1
        self.items = {}
        for item in data.get("items") or []:
            if (item.get("metadata") or {}).get("name"):
                kept = self.keep(item)
                if kept is not None:
                    self.items[self.key(item)] = kept
        self.synced, self.error = True, None
        self.changes += 1
        self.on_change()
        return str((data.get("metadata") or {}).get("resourceVersion") or "") or None

    def _apply(self, event: Obj) -> str | None:
        """One watch event into the cache; the resourceVersion it carries."""
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        kind = event.get("type")
        name = meta.get("name")
        version = meta.get("resourceVersion")
        if kind == "BOOKMARK" or not name:
            return str(version) if version else None
        key = self.key(obj)
        before = self.items.get(key)
        kept = self.keep(obj) if kind in ("ADDED", "MODIFIED") else None
        if kept is None:
            self.items.pop(key, None)
        else:
            self.items[key] = kept
        self.events += 1
        if self.error is None and kept == before:
            return str(version) if version else None  # nothing kept changed
        self.error = None
        self.changes += 1
        self.on_change()
        return str(version) if version else None

    def _failed(self, error: Exception) -> bool:
        """Keep the failure until the next list or event; list again (it proves the
        cluster answers)."""
        log.debug("list/watch %s: %s", self.path, error)
        self.error = error
        self.changes += 1
        self.on_change()
        return True
