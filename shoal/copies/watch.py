"""Watches of the objects the kube controller applied, on the clusters that run them.

One task per *target* (cluster, apiVersion, kind, namespace) that some
application's manifest names on a cluster it is scheduled to or runs on: list,
then watch from the list's resourceVersion, resume from the last
resourceVersion seen after a disconnect, re-list on 410 Gone. An event about
an object an application applied (apiVersion, kind, namespace, name) calls
``on_event(app)``; after each (re-)list every application of the target is
notified, since events may have been missed. Targets are reference-counted: the
watch stops when no application names it any more.

The watch also keeps the last object it saw of each name (``get``), so the
controller learns readiness and ownership from it instead of reading each
object back; an object seen through the controller's own apply (``observe``)
is kept until the watch brings a newer one, never an older one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from shoal.client.informer import CacheKey
from shoal.client.kube import (
    ClusterKey,
    KubeApiError,
    KubeCluster,
    KubeUnreachable,
    compacted,
)
from shoal.machinery.listwatch import ListWatch
from shoal.machinery.types import Obj

log = logging.getLogger(__name__)

ObjKey = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
Entry = tuple[ClusterKey, ObjKey]
Target = tuple[ClusterKey, str, str, str]  # cluster, apiVersion, kind, namespace


def _target(entry: Entry) -> Target:
    cluster, (api_version, kind, namespace, _) = entry
    return (cluster, api_version, kind, namespace)


def _version(obj: Obj) -> int | None:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else None


def newer(obj: Obj, than: Obj | None) -> bool:
    """``obj`` is a later version than ``than`` (unknown versions count as later)."""
    if than is None:
        return True
    mine, theirs = _version(obj), _version(than)
    return mine is None or theirs is None or mine >= theirs


@dataclass(eq=False)
class ClusterWatches:
    """The watches of every target some application names; ``get_kube`` reaches a cluster."""

    get_kube: Callable[[ClusterKey], Awaitable[KubeCluster | None]]
    on_event: Callable[[CacheKey], None]
    _: KW_ONLY
    # (the object as last kept or None, the event's) -> whether the event wakes its applications
    wakes: Callable[[Obj | None, Obj], bool] = lambda before, after: True
    timeout_seconds: int = 300
    retry: float = 0.5
    max_retry: float = 10.0
    _apps: dict[CacheKey, set[Entry]] = field(default_factory=dict, init=False, repr=False)
    _index: dict[Entry, set[CacheKey]] = field(default_factory=dict, init=False, repr=False)
    _refs: dict[Target, int] = field(default_factory=dict, init=False, repr=False)
    _tasks: dict[Target, asyncio.Task[None]] = field(default_factory=dict, init=False, repr=False)
    _synced: set[Target] = field(default_factory=set, init=False, repr=False)
    _objects: dict[Target, dict[str, Obj]] = field(default_factory=dict, init=False, repr=False)
    # objects being applied: by whom, and the versions of their events meanwhile, held
    # from the applier until the answer
    _held: dict[Entry, tuple[CacheKey, list[int | None]]] = field(
        default_factory=dict, init=False, repr=False
    )
    events: int = field(default=0, init=False)  # events that woke an application (tests, metrics)
    lists: int = field(default=0, init=False)

    # registration -------------------------------------------------------------------

    def set_app(self, app: CacheKey, entries: Iterable[Entry]) -> None:
        """The objects ``app`` has (or will have) on which clusters; replaces the last call."""
        new = set(entries)
        old = self._apps.get(app, set())
        for entry in old - new:
            apps = self._index.get(entry)
            if apps is not None:
                apps.discard(app)
                if not apps:
                    del self._index[entry]
            self._unref(_target(entry))
        for entry in new - old:
            self._index.setdefault(entry, set()).add(app)
            self._ref(_target(entry))
        if new:
            self._apps[app] = new
        else:
            self._apps.pop(app, None)

    def entries(self, app: CacheKey) -> set[Entry]:
        """What the last ``set_app`` gave for ``app``."""
        return self._apps.get(app, set())

    def watched(self, app: CacheKey, cluster: ClusterKey) -> bool:
        """Every target of ``app`` on ``cluster`` has a live watch (events will come)."""
        targets = {_target(e) for e in self._apps.get(app, ()) if e[0] == cluster}
        return bool(targets) and targets <= self._synced

    def get(self, cluster: ClusterKey, obj: ObjKey) -> tuple[bool, Obj | None]:
        """(whether the watch of ``obj`` is live, the object as last seen: None if absent)."""
        api_version, kind, namespace, name = obj
        target = (cluster, api_version, kind, namespace)
        if target not in self._synced:
            return False, None
        return True, self._objects.get(target, {}).get(name)

    def applying(self, cluster: ClusterKey, obj: ObjKey, app: CacheKey) -> None:
        """``app`` is writing ``obj``. The write's own event may come before its answer:
        events of ``obj`` meanwhile wake ``app`` only once ``observe`` tells them apart."""
        self._held.setdefault((cluster, obj), (app, []))

    def observe(self, cluster: ClusterKey, obj: ObjKey, live: Obj | None) -> None:
        """``live`` came back from a write (None: the write failed): keep it unless the watch
        has seen a newer one, and wake the object's other applications if it is news to them.
        An event held meanwhile that is newer than ``live``, or any after a failure, wakes the
        writer."""
        api_version, kind, namespace, name = obj
        target = (cluster, api_version, kind, namespace)
        app, held = self._held.pop((cluster, obj), (None, []))
        objects = self._objects.get(target)
        if live is not None and objects is not None and newer(live, before := objects.get(name)):
            objects[name] = live
            if self.wakes(before, live):  # news to the object's other applications
                self._wake(self._index.get((cluster, obj), set()) - {app})
        mine = None if live is None else _version(live)
        if app is not None and any(
            mine is None or version is None or version > mine for version in held
        ):
            self._wake([app])

    @property
    def targets(self) -> set[Target]:
        return set(self._tasks)

    def _ref(self, target: Target) -> None:
        self._refs[target] = self._refs.get(target, 0) + 1
        if target not in self._tasks:
            self._tasks[target] = asyncio.create_task(self._run(target))

    def _unref(self, target: Target) -> None:
        count = self._refs.get(target, 0) - 1
        if count > 0:
            self._refs[target] = count
            return
        self._refs.pop(target, None)
        self._synced.discard(target)
        self._objects.pop(target, None)
        task = self._tasks.pop(target, None)
        if task is not None:
            task.cancel()

    def restart(self, cluster: ClusterKey) -> None:
        """Watch ``cluster``'s targets anew: it was deleted, registered again or given
        another kubeconfig, and a watch on the old connection may hang until its timeout."""
        for target in [t for t in self._tasks if t[0] == cluster]:
            self._synced.discard(target)
            self._objects.pop(target, None)
            self._tasks.pop(target).cancel()
            self._tasks[target] = asyncio.create_task(self._run(target))

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        self._synced.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # one watch ----------------------------------------------------------------------

    def _notify(self, target: Target, name: str | None, version: int | None = None) -> None:
        """Wake the applications of ``name`` (all of ``target`` after a list), but one that
        is applying it: it learns of the event (``version``) when its answer comes."""
        cluster, api_version, kind, namespace = target
        if name is None:  # after a list: everybody on the target
            apps = {
                app
                for entry, keys in self._index.items()
                if _target(entry) == target
                for app in keys
            }
        else:
            entry = (cluster, (api_version, kind, namespace, name))
            apps = set(self._index.get(entry, ()))
            held = self._held.get(entry)
            if held is not None and held[0] in apps:
                apps.discard(held[0])
                held[1].append(version)
        self._wake(apps)

    def _wake(self, apps: Iterable[CacheKey]) -> None:
        for app in apps:
            self.events += 1
            self.on_event(app)

    def _keep(self, target: Target, event: str, obj: Obj) -> bool:
        """Keep what the event says of its object; whether it wakes the object's applications.

        An update older than what is kept tells nothing new, nor one that ``wakes`` finds
        changes nothing they read (a Deployment's status moves several times on its way to
        ready, and again after). A deletion always does."""
        objects = self._objects.setdefault(target, {})
        name = obj["metadata"]["name"]
        before = objects.get(name)
        if event == "DELETED":
            if newer(obj, before):
                objects.pop(name, None)
            return True
        if not newer(obj, before):
            return False
        objects[name] = obj
        return self.wakes(before, obj)

    async def _run(self, target: Target) -> None:
        cluster, api_version, kind, namespace = target

        async def connect() -> tuple[KubeCluster, str]:
            kube = await self.get_kube(cluster)
            if kube is None:
                raise KubeUnreachable(f"cluster {cluster[1]} is unknown")
            return kube, await kube.collection(api_version, kind, namespace)

        async def list_() -> str:
            kube, path = await connect()
            listed: dict[str, Any] = await kube.request("GET", path)
            items: list[Obj] = listed.get("items") or []
            for item in items:  # list items may leave their kind out
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
            self._objects[target] = {i["metadata"]["name"]: i for i in items}
            self.lists += 1
            self._synced.add(target)
            self._notify(target, None)
            return str((listed.get("metadata") or {}).get("resourceVersion") or "0")

        async def events(version: str) -> AsyncIterator[str]:
            kube, path = await connect()
            self._synced.add(target)
            async for event in kube.watch(path, version, self.timeout_seconds):
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                version = str(meta.get("resourceVersion") or version)
                kind_of_event = event.get("type")
                if kind_of_event in ("ADDED", "MODIFIED", "DELETED") and self._keep(
                    target, kind_of_event, obj
                ):
                    deleted = kind_of_event == "DELETED"
                    self._notify(target, meta.get("name"), None if deleted else _version(obj))
                yield version

        def failed(error: Exception) -> None:
            self._synced.discard(target)
            if isinstance(error, KubeApiError):
                log.info("watch %s %s in %s on %s: %s", api_version, kind, namespace,
                         cluster[1], error)
            elif isinstance(error, KubeUnreachable):
                log.debug("watch %s %s on %s: %s", api_version, kind, cluster[1], error)
            else:
                log.error("watch %s %s on %s failed; retrying", api_version, kind, cluster[1],
                          exc_info=error)

        await ListWatch(
            list_, events, compacted=compacted, failed=failed,
            retry=self.retry, max_retry=self.max_retry,
        ).run()
