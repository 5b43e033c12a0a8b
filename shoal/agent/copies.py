"""A pull cluster's agent runs its cluster's copies: the ``Copy`` objects the hub writes.

It follows the Copies placed on its cluster (the API shows it no other) with Shoal's
informer: a cut connection resumes from the last revision seen, a compacted one (410)
lists again. Each copy is run by the same ``Applier`` as the hub runs for push clusters,
with the member cluster's own credentials: applied when it is new or changed, looked at
again every ``resync`` seconds (someone else's change is undone: drift). The objects a
copy names are watched on the member cluster (``shoal.copies.watch``, as the hub watches
push clusters): an event that changes what a look reads (readiness, someone else's
change, a deletion) wakes the copy at once, and the looks read the watch's cache, not
the member's API. Only a copy whose watch is not live yet is looked at every ``poll``
seconds while it is not ready. Its status is written back by compare-and-swap,
only when it changed. A deleted copy's objects are removed, then its finalizer dropped.
On connecting, and after each listing again, objects on the member cluster that belong
to applications whose Copy this agent ran and which have no Copy here any more are
pruned: a copy gone while the agent was away leaves nothing behind. Only those: the
applications it ran are kept in its state directory, so that objects another applier
put there (the hub's, before the cluster moved to pull mode, its Copy not written yet)
are never taken for leftovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from shoal.client.informer import Informer
from shoal.client.kube import KubeApiError, KubeCluster, KubeUnreachable
from shoal.client.rest import ApiError, Conflict, NotFound, ShoalClient, Unreachable
from shoal.copies.applier import PRUNED_KINDS, Applier
from shoal.copies.member import KubeFailure, Members, obj_key
from shoal.copies.objects import ident, tells_anything
from shoal.copies.owners import Owner
from shoal.copies.watch import ClusterWatches, Entry
from shoal.machinery.files import write_atomically
from shoal.machinery.types import Obj
from shoal.model.base import Reason, ReasonCode, ResourceRef
from shoal.model.copies import COPY_FINALIZER, Copy, CopyReport, CopyWork

log = logging.getLogger(__name__)

Key = tuple[str | None, str]
RAN_FILE = "copies.json"
"""In the agent's state directory: the applications whose copies it ran (their uids)."""


def status_fields(work: CopyWork, report: CopyReport | None, failure: KubeFailure | None,
                  repairs: int) -> dict[str, Any]:  # fmt: skip
    """The copy's status as the hub reads it back (``kube.pulled.report_of``)."""
    if report is None:
        assert failure is not None
        return {"generation": work.generation, "ready": False, "ready_replicas": 0,
                "state": None, "drift_repairs": repairs,
                "reason": Reason(code=failure.code, message=str(failure)[:1000])}  # fmt: skip
    return {
        "generation": work.generation,
        "ready": report.ready,
        "ready_replicas": report.ready_replicas,
        "state": report.state,
        "reason": None,
        "health": report.health,
        "services": report.services,
        "last_applied_manifest": report.last_applied_manifest,
        "last_observed_manifest": report.last_observed_manifest,
        "taken": report.taken,
        "drift_repairs": repairs,
    }


def _dumped(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value.model_dump(mode="json") if hasattr(value, "model_dump") else (
        [v.model_dump(mode="json") if hasattr(v, "model_dump") else v for v in value]
        if isinstance(value, list) else value) for name, value in fields.items()}  # fmt: skip


@dataclass(eq=False)
class CopyRunner:
    """Runs the copies of cluster ``namespace/name`` on ``kube`` until cancelled."""

    client: ShoalClient
    kube: KubeCluster
    namespace: str
    name: str
    resync: float = 10.0  # seconds between two looks at a copy at rest (drift repair)
    poll: float = 0.5  # seconds between two looks at a copy not ready yet, unwatched
    fallback: float = 5.0  # the same for a watched copy (its objects' events wake it)
    state_dir: Path | None = None  # where the applications it ran are kept (None: memory)
    ran: set[str] = field(default_factory=set, init=False)  # their uids
    applier: Applier = field(init=False)
    watches: ClusterWatches = field(init=False)
    informer: Informer[Copy] = field(init=False)
    pruned_after: int = field(default=0, init=False)  # the listing the last prune followed
    prunes: int = field(default=0, init=False)
    _wake: dict[Key, asyncio.Event] = field(default_factory=dict, init=False)
    _tasks: dict[Key, asyncio.Task[None]] = field(default_factory=dict, init=False)
    _repairs: dict[Key, int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        ref = ResourceRef(api="kubernetes", kind="Cluster", namespace=self.namespace,
                          name=self.name)  # fmt: skip
        self.watches = ClusterWatches(self._member, self._woken, wakes=tells_anything)
        self.applier = Applier(self.kube, ref, Members(self.watches, self._exists))
        self.informer = Informer(self.client, Copy, self.namespace,
                                 on_change=self._changed, on_delete=self._gone)  # fmt: skip
        if self.state_dir is not None and (self.state_dir / RAN_FILE).exists():
            self.ran = set(orjson.loads((self.state_dir / RAN_FILE).read_bytes()))

    def _remember(self, uids: set[str]) -> None:
        if uids == self.ran:
            return
        self.ran = uids
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(self.state_dir / RAN_FILE, orjson.dumps(sorted(uids)), private=True)

    def _exists(self, owner: Owner) -> bool:
        """An application with a copy here (the owner check when another one's object is
        found in the way)."""
        return any(c.spec.app_uid == owner.uid for c in self.informer.items())

    async def _member(self, cluster: Key) -> KubeCluster:
        return self.kube

    def _woken(self, key: Key) -> None:
        """An object of copy ``key`` changed on the member cluster: look at it now."""
        wake = self._wake.get(key)
        if wake is not None:
            wake.set()

    def _entries(self, copy: Copy) -> set[Entry]:
        """The member objects of ``copy``: what it applies and what it applied last."""
        namespace = copy.spec.kube_namespace
        objects = [*copy.spec.manifest, *copy.status.last_applied_manifest]
        entries: set[Entry] = set()
        for obj in objects:
            with contextlib.suppress(KeyError, TypeError):
                entries.add((self.applier.key, obj_key(obj, namespace)))
        return entries

    def _changed(self, copy: Copy, old: Copy | None = None) -> None:
        key = (copy.metadata.namespace, copy.metadata.name)
        self.watches.set_app(key, self._entries(copy))
        if old is not None and old.spec == copy.spec and old.metadata.deleted == (
            copy.metadata.deleted
        ):
            return  # its status (our own write), nothing to run
        if key not in self._tasks or self._tasks[key].done():
            self._wake[key] = asyncio.Event()
            self._tasks[key] = asyncio.create_task(self._follow(key))
        self._wake[key].set()

    def _gone(self, copy: Copy) -> None:
        key = (copy.metadata.namespace, copy.metadata.name)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
        self._wake.pop(key, None)
        self.watches.set_app(key, ())
        self.applier.forget(copy.spec.app_uid)

    async def run(self) -> None:
        """Follow the copies (the informer) and prune after each listing."""
        informer = asyncio.create_task(self.informer.run())
        try:
            while True:
                await self.informer.wait_synced()
                if self.informer.lists != self.pruned_after:
                    self.pruned_after = self.informer.lists
                    with contextlib.suppress(KubeApiError, KubeUnreachable):
                        await self.prune()
                if informer.done():
                    informer.result()
                await asyncio.sleep(self.poll)
        finally:
            informer.cancel()
            for task in [informer, *self._tasks.values()]:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await self.watches.stop()

    async def prune(self) -> int:
        """Remove what applications without a Copy here left on the member cluster."""
        copies = self.informer.items()
        kinds = set(PRUNED_KINDS)
        for copy in copies:
            for obj in copy.spec.manifest:
                api_version, kind = obj.get("apiVersion"), obj.get("kind")
                if isinstance(api_version, str) and isinstance(kind, str):
                    kinds.add((api_version, kind))
        uids = {copy.spec.app_uid for copy in copies}
        ran = set(self.ran)
        pruned = await self.applier.prune(
            kinds, lambda owner: owner.uid in uids or owner.uid not in ran
        )
        self._remember(self.ran & uids)
        self.prunes += 1
        if pruned:
            log.info("cluster %s/%s: %d objects of applications without a copy here removed",
                     self.namespace, self.name, pruned)  # fmt: skip
        return pruned

    async def _follow(self, key: Key) -> None:
        """One copy: run it when woken, or when its next look is due."""
        wake = self._wake[key]
        delay: float | None = None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)
            wake.clear()
            copy = self.informer.get(key[1], key[0])
            if copy is None:
                return
            try:
                delay = await self.sync(copy)
            except (ApiError, Unreachable) as error:  # the hub is away: later
                log.info("copy %s/%s: %s", key[0], key[1], error)
                delay = 1.0
            if delay is None:
                return

    async def sync(self, copy: Copy) -> float | None:
        """Run ``copy`` once; seconds until the next look (None: it is gone)."""
        if copy.metadata.deleted is not None:
            return await self._remove(copy)
        work, status = copy.spec, copy.status
        key = (copy.metadata.namespace, copy.metadata.name)
        spec = work
        if status.generation == work.generation and status.last_observed_manifest:
            # started afresh: go on from what this agent observed last
            spec = work.model_copy(update={"observed": status.last_observed_manifest})
        report: CopyReport | None = None
        failure: KubeFailure | None = None
        self._remember(self.ran | {work.app_uid})  # before its first object is applied
        try:
            report = await self.applier.apply(spec, ReasonCode.RECONCILE_FAILED)
        except KubeFailure as error:
            failure = error
        if report is not None and report.drifted:
            self._repairs[key] = self._repairs.get(key, status.drift_repairs) + 1
        fields = status_fields(work, report, failure, self._repairs.get(key, status.drift_repairs))
        await self._write(copy, fields)
        if failure is not None:
            return 2.0
        assert report is not None
        if report.ready:
            return self.resync
        watched = self.watches.watched(key, self.applier.key)
        return self.fallback if watched else self.poll

    async def _write(self, copy: Copy, fields: dict[str, Any]) -> None:
        """The status fields that changed, by compare-and-swap (a conflict: the next look)."""
        stored = copy.status.model_dump(mode="json")
        wire = _dumped(fields)
        changed = {k: v for k, v in wire.items() if stored.get(k) != v}
        if not changed:
            return
        with contextlib.suppress(Conflict, NotFound):
            written = await self.client.patch_status(
                Copy, copy.metadata.name, copy.metadata.namespace, changed,
                copy.metadata.resource_version,
            )  # fmt: skip
            self.informer.known(written)

    async def _remove(self, copy: Copy) -> float | None:
        """A deleted copy: its objects go, then its finalizer (the hub waits for that)."""
        if COPY_FINALIZER not in copy.metadata.finalizers:
            return None
        objects = _removal_order(copy.status.last_applied_manifest, copy.spec.manifest)
        try:
            left = await self.applier.remove(copy.spec.model_copy(update={"manifest": objects}))
        except (KubeApiError, KubeUnreachable) as error:
            log.info("copy %s: not removed yet: %s", copy.metadata.name, error)
            return 2.0
        if left:
            return self.poll
        kept = [f for f in copy.metadata.finalizers if f != COPY_FINALIZER]
        path = (f"/kubernetes/namespaces/{copy.metadata.namespace}/copies/"
                f"{copy.metadata.name}/finalizers")  # fmt: skip
        body = {"metadata": {"finalizers": kept,
                             "resource_version": copy.metadata.resource_version}}
        try:
            await self.client.request("PUT", path, body=body)
        except Conflict:
            return self.poll
        except NotFound:
            return None
        return None


def _removal_order(applied: list[Obj], manifest: list[Obj]) -> list[Obj]:
    """What a copy put on the member cluster, last applied first removed."""
    objects = list(reversed(applied or manifest))
    seen = {ident(obj) for obj in objects}
    return objects + [obj for obj in manifest if ident(obj) not in seen]
