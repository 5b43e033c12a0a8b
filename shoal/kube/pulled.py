"""The hub's side of a pull cluster's copies: written as ``Copy`` objects, read back.

A pull cluster's agent runs the cluster's copies with the member's own credentials
(``shoal join``); the hub holds none. For such a cluster the kube controller hands each
copy to a ``PulledCopies`` in place of an ``Applier``: ``apply`` writes the copy's
``Copy`` (created, or updated by compare-and-swap only when the copy changed) and answers
the report the agent wrote in its status, exactly what the applier would have answered
in-process. Creates go in batches (``POST /kubernetes/copies``, one request and one store
commit for the copies of every cluster of an application, and of concurrent reconciles).
``remove`` deletes the ``Copy`` and answers how many are still there, so the
hub waits for the agent's removal as it waits for a push removal. Push clusters get no
object: their path writes nothing more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.client.batcher import Batcher
from shoal.client.informer import Informer
from shoal.client.rest import Conflict, NotFound, ShoalClient
from shoal.copies.applier import NoAddress
from shoal.copies.member import KubeFailure
from shoal.model.base import Metadata, ReasonCode, ResourceRef
from shoal.model.copies import (
    COPY_FINALIZER,
    Copy,
    CopyReport,
    CopySpec,
    CopyWork,
    copy_name,
)
from shoal.model.kubernetes import Cluster

UNCOMPARED = {"observed", "generation", "previous", "prune", "own"}
"""Fields of a copy that alone do not make it change: where an agent goes on from (the
last observation, what was applied last, what to prune or take as its own) moves with
the status the hub writes after each apply, and matters only with a new manifest, which
rewrites the whole copy."""


def managed(cluster: Cluster) -> bool:
    """Shoal runs copies there: the hub holds its kubeconfig (push), or its agent runs them
    (pull)."""
    return cluster.spec.kubeconfig is not None or cluster.spec.mode == "pull"


def same_work(work: CopyWork, spec: CopySpec) -> bool:
    return work.model_dump(exclude=UNCOMPARED) == spec.model_dump(exclude=UNCOMPARED)


def report_of(copy: Copy, spec: CopySpec) -> CopyReport:
    """The report of the applier, from what the agent wrote; a copy not answered yet (its
    status answers an older generation) is not ready. Raises ``KubeFailure`` when the
    agent could not apply it (its reason)."""
    status = copy.status
    if status.generation != copy.spec.generation:
        return CopyReport.model_construct(
            cluster=spec.cluster, replicas=spec.replicas, ready_replicas=0, state=None,
            reason=None, ready=False, health=status.health, services={},
            last_applied_manifest=[], last_observed_manifest=[], applied=False,
            drifted=[], taken=[],
        )  # fmt: skip
    if status.reason is not None:
        raise KubeFailure(status.reason.code, f"cluster {spec.cluster.name}: "
                                              f"{status.reason.message}")  # fmt: skip
    return CopyReport.model_construct(
        cluster=spec.cluster,
        replicas=spec.replicas,
        ready_replicas=status.ready_replicas,
        state=status.state,
        reason=None,
        ready=status.ready,
        health=status.health,
        services=status.services,
        last_applied_manifest=status.last_applied_manifest,
        last_observed_manifest=status.last_observed_manifest,
        applied=False,
        drifted=[],
        taken=list(status.taken),
    )


@dataclass(eq=False)
class PulledCopies:
    """The copies of one pull cluster, as ``Copy`` objects its agent runs."""

    client: ShoalClient
    cluster: ResourceRef
    informer: Informer[Copy]
    creates: Batcher  # of the batch create of Copies (``create_items``)
    # our own last write of each copy: newer than the informer until its event comes
    written: dict[str, Copy] = field(default_factory=dict, repr=False)

    def forget(self, uid: str) -> None:
        """Nothing is kept per application here (the ``Copy`` is the record)."""

    def current(self, name: str) -> Copy | None:
        """The Copy as last known: our own last write until the informer has seen it (or
        anything after it), then the informer's (None: gone)."""
        namespace = self.cluster.namespace
        seen = self.informer.get(name, namespace)
        mine = self.written.get(name)
        if mine is None:
            return seen
        if self.informer.revision < (mine.metadata.resource_version or 0):
            return mine
        self.written.pop(name, None)
        return seen

    async def apply(self, spec: CopySpec, code: ReasonCode) -> CopyReport:
        """Write the copy when it changed; the agent's report of it."""
        name = copy_name(spec.app_name, spec.cluster.name)
        copy = self.current(name)
        if copy is not None and copy.spec.app_uid != spec.app_uid:
            # an application of the same name, deleted: its copy goes first
            await self._delete(copy)
            raise KubeFailure(code, f"cluster {spec.cluster.name}: the copy of an earlier "
                                    f"application {spec.app_name} is still being removed")
        if copy is not None and copy.metadata.deleted is not None:
            raise KubeFailure(code, f"cluster {spec.cluster.name}: its earlier copy is still "
                                    "being removed by the cluster's agent")  # fmt: skip
        if copy is None:
            copy = await self._create(name, spec)
        elif not same_work(copy.spec, spec):
            work = CopyWork.model_validate(
                {**spec.model_dump(), "generation": copy.spec.generation + 1}
            )
            changed = copy.model_copy(update={"spec": work})
            copy = self._keep(await self.client.update(changed))  # compare-and-swap
        return report_of(copy, spec)

    async def _create(self, name: str, spec: CopySpec) -> Copy:
        namespace = self.cluster.namespace
        copy = Copy(
            metadata=Metadata(name=name, namespace=namespace, finalizers=[COPY_FINALIZER]),
            spec=CopyWork.model_validate({**spec.model_dump(), "generation": 1}),
        )  # fmt: skip
        try:
            version = await self.creates.write(copy.model_dump(mode="json"))
        except Conflict:  # written already, not seen yet: read it
            return self._keep(await self.client.get(Copy, name, namespace))
        # as stored, as far as the hub reads it (its revision; the informer brings the rest)
        metadata = copy.metadata.model_copy(update={"resource_version": version})
        return self._keep(copy.model_copy(update={"metadata": metadata}))

    def _keep(self, copy: Copy) -> Copy:
        self.written[copy.metadata.name] = copy
        return copy

    async def remove(self, spec: CopySpec, *, whole: bool = True) -> int:
        """Delete the copy (its agent removes its objects, then its finalizer): 1 while
        it is still there, 0 once it is gone. Less than the whole copy (what a copy placed
        here again no longer has) is the agent's to prune when it applies the new one."""
        if not whole:
            return 0
        copy = self.current(copy_name(spec.app_name, spec.cluster.name))
        if copy is None or copy.spec.app_uid != spec.app_uid:
            return 0
        if copy.metadata.deleted is None:
            await self._delete(copy)
        return 1

    async def prune(self, uses: Callable[[Copy], bool]) -> int:
        """Delete this cluster's Copies that ``uses`` says no application uses here any
        more (its agent removes their objects): how many."""
        pruned = 0
        for copy in list(self.informer.items()):
            mine = (copy.metadata.namespace, copy.spec.cluster.name) == (
                self.cluster.namespace, self.cluster.name)  # fmt: skip
            if mine and copy.metadata.deleted is None and not uses(copy):
                await self._delete(copy)
                pruned += 1
        return pruned

    async def _delete(self, copy: Copy) -> None:
        try:
            self._keep(await self.client.delete(Copy, copy.metadata.name,
                                                copy.metadata.namespace))  # fmt: skip
        except NotFound:
            self.written.pop(copy.metadata.name, None)

    async def shutdown_address(self, spec: CopySpec) -> str:
        """A pull cluster's workloads are not reached from the hub (Krake's shutdown hook
        then waits its grace time)."""
        raise NoAddress("a pull cluster's workloads are not reachable from the hub")

    async def drop(self) -> None:
        """The hub stops handing this cluster's copies to an agent: the cluster is gone for
        good (deleted), or moved to push mode. Each Copy loses its finalizer first, then
        goes: an agent still running sees it vanish and removes nothing (what runs stays,
        for the hub's applier to take over, or with the deleted cluster)."""
        for copy in list(self.informer.items()):
            if copy.spec.cluster.name != self.cluster.name:
                continue
            if copy.metadata.namespace != self.cluster.namespace:
                continue
            path = f"/kubernetes/namespaces/{copy.metadata.namespace}/copies/" \
                   f"{copy.metadata.name}"  # fmt: skip
            with contextlib.suppress(NotFound):
                await self.client.request("PUT", f"{path}/finalizers",
                                          body={"metadata": {"finalizers": []}})  # fmt: skip
                await self.client.delete(Copy, copy.metadata.name, copy.metadata.namespace)
            self.written.pop(copy.metadata.name, None)
