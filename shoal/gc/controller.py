"""The garbage collector: cascading deletion along ``metadata.owners``.

An object that has dependents carries the finalizer ``shoal.gc/cascade``; when
it is deleted, its dependents are deleted first and the finalizer is removed
once none is left, so the API removes the owner last. A Cluster never
cascades: its applications are rescheduled by the scheduler, not deleted.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from shoal.client.informer import Informer
from shoal.client.rest import ApiError, Conflict, NotFound, ShoalClient, Unreachable
from shoal.controllers.base import Controller
from shoal.events.expiry import run_expiry
from shoal.gc.view import ApplicationMeta
from shoal.machinery.workqueue import WorkQueue
from shoal.model import registry
from shoal.model.base import Kind, ResourceRef
from shoal.model.events import Event
from shoal.model.kubernetes import Application

log = logging.getLogger(__name__)

FINALIZER = "shoal.gc/cascade"
# (api, kind, namespace, name)
Ref = tuple[str, str, str | None, str]
NO_CASCADE = {("kubernetes", "Cluster")}


def ref_of(obj: Kind) -> Ref:
    return (obj.api, obj.kind, obj.metadata.namespace, obj.metadata.name)


def _owner(ref: ResourceRef) -> Ref:
    return (ref.api, ref.kind, ref.namespace, ref.name)


def _same_to_gc(old: Kind, new: Kind) -> bool:
    """Whether nothing the collector decides by (owners, finalizers, deletion) changed."""
    a, b = old.metadata, new.metadata
    return a.deleted == b.deleted and a.finalizers == b.finalizers and a.owners == b.owners


class GarbageCollector(Controller):
    def __init__(self, client: ShoalClient, kinds: tuple[type[Kind], ...] | None = None) -> None:
        self.client = client
        # Events have no dependents and come in bursts: their expiry sweep handles them.
        self.kinds = kinds or tuple(k for k in registry.KINDS if k is not Event)
        self.queue: WorkQueue[Ref] = WorkQueue()
        self.objects: dict[Ref, Kind] = {}
        self.dependents: dict[Ref, set[Ref]] = defaultdict(set)
        # Applications are read as their metadata alone (most writes are theirs).
        self.informers: list[Informer[Any]] = [
            Informer(
                client,
                ApplicationMeta if kind is Application else kind,
                on_change=self._set,
                on_delete=self._removed,
            )
            for kind in self.kinds
        ]
        super().__init__()

    async def start(self) -> None:
        await self.start_informers(*self.informers)
        self.spawn(run_expiry(self.client))  # events an hour after their last occurrence
        self.spawn_workers(4, self.queue, self.sync, self._retry)

    # index -----------------------------------------------------------------------------

    def _owners(self, obj: Kind) -> set[Ref]:
        return {_owner(ref) for ref in obj.metadata.owners}

    def _set(self, obj: Kind, old: Kind | None = None) -> None:
        ref = ref_of(obj)
        self.objects[ref] = obj
        if old is not None and _same_to_gc(old, obj):
            return  # a status or spec write: nothing the collector decides by changed
        before = self._owners(old) if old is not None else set()
        after = self._owners(obj)
        for owner in before - after:
            self.dependents[owner].discard(ref)
            self.queue.add(owner)
        for owner in after - before:
            self.dependents[owner].add(ref)
            self.queue.add(owner)
        self.queue.add(ref)

    def _removed(self, obj: Kind) -> None:
        ref = ref_of(obj)
        self.objects.pop(ref, None)
        for owner in self._owners(obj):
            self.dependents[owner].discard(ref)
            self.queue.add(owner)

    def _live_dependents(self, ref: Ref) -> list[Kind]:
        return [self.objects[d] for d in self.dependents.get(ref, ()) if d in self.objects]

    # work ------------------------------------------------------------------------------

    def _retry(self, ref: Ref, error: Exception) -> None:
        if isinstance(error, Conflict | NotFound):
            self.queue.add_after(ref, 0.05)
        elif isinstance(error, ApiError | Unreachable):
            log.warning("gc %s: %s; retrying", ref, error)
            self.queue.add_after(ref, 1.0)
        else:
            log.exception("gc %s failed; retrying", ref)
            self.queue.add_after(ref, 1.0)

    async def sync(self, ref: Ref) -> None:
        obj = self.objects.get(ref)
        if obj is None:
            return
        if (ref[0], ref[1]) in NO_CASCADE:
            if FINALIZER in obj.metadata.finalizers:
                await self._set_finalizer(obj, False)
            return
        dependents = self._live_dependents(ref)
        has_finalizer = FINALIZER in obj.metadata.finalizers
        if obj.metadata.deleted is None:
            if dependents and not has_finalizer:
                await self._set_finalizer(obj, True)
            return
        if not has_finalizer:
            return
        if dependents:
            for dependent in dependents:
                if dependent.metadata.deleted is None:
                    await self.client.delete(
                        type(dependent), dependent.metadata.name, dependent.metadata.namespace
                    )
            return  # the dependents' removal requeues this owner
        await self._set_finalizer(obj, False)

    async def _set_finalizer(self, obj: Kind, present: bool) -> None:
        finalizers = [f for f in obj.metadata.finalizers if f != FINALIZER]
        if present:
            finalizers.append(FINALIZER)
        if isinstance(obj, ApplicationMeta):
            meta = obj.metadata
            await self.client.set_finalizers(
                Application, meta.name, meta.namespace, finalizers, meta.resource_version
            )
            return
        obj = obj.model_copy(deep=True)
        obj.metadata.finalizers = finalizers
        await self.client.update(obj)
