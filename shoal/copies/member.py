"""An application's objects in one member cluster: read, applied and deleted with owners.

Reads come from the watch cache (``shoal.copies.watch``) when the watch of
the object is live, from the cluster otherwise. Applies put the application's
owner labels on every object and refuse one that another application owns
(``shoal.copies.owners``); deletes remove only what the application owns, with
the live object's uid as precondition, so one recreated meanwhile by somebody
else survives. Objects claimed in this process but not yet seen by the watch
(claimed from the owner check until the apply answers) count as owned, so
two workers never apply the same object for two applications at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.client.kube import ClusterKey, KubeApiError, KubeCluster, KubeUnreachable
from shoal.copies.objects import ident
from shoal.copies.owners import (
    Owner,
    describe,
    former_owner,
    mine,
    owned,
    owner_of,
    refusal,
)
from shoal.copies.watch import ClusterWatches, ObjKey
from shoal.machinery.types import Obj
from shoal.model.base import ReasonCode

log = logging.getLogger(__name__)

Claim = tuple[ClusterKey, ObjKey]


class KubeFailure(Exception):
    """A step failed; ``code`` says which reason the application gets."""

    def __init__(self, code: ReasonCode, message: str) -> None:
        self.code = code
        super().__init__(message)


def obj_key(obj: Obj, namespace: str) -> ObjKey:
    api_version, kind, ns, name = ident(obj)
    return (api_version, kind, ns or namespace, name)


@dataclass(frozen=True, slots=True)
class Taken:
    """An object taken over from another application of the same namespace."""

    what: str  # "Deployment web"
    owner: Owner


@dataclass
class Applied:
    """What one apply left: the live objects, in the manifest's order."""

    lives: list[Obj | None]
    taken: list[Taken] = field(default_factory=list)  # objects taken over from their owner


@dataclass(eq=False)
class Members:
    """The object I/O of the kube controller; ``exists`` tells a live owner from a gone one."""

    watches: ClusterWatches | None
    exists: Callable[[Owner], bool]
    claims: dict[Claim, Owner] = field(default_factory=dict)
    cached_reads: int = 0
    direct_reads: int = 0

    async def read(
        self, kube: KubeCluster, cluster: ClusterKey, obj: Obj, namespace: str
    ) -> Obj | None:
        if self.watches is not None:
            live, cached = self.watches.get(cluster, obj_key(obj, namespace))
            if live:
                self.cached_reads += 1
                return cached
        self.direct_reads += 1
        return await kube.read(obj, namespace)

    async def read_all(
        self, kube: KubeCluster, cluster: ClusterKey, objects: list[Obj], namespace: str
    ) -> list[Obj | None]:
        return [await self.read(kube, cluster, obj, namespace) for obj in objects]

    def _claimed(self, cluster: ClusterKey, obj: Obj, namespace: str, me: Owner) -> Owner | None:
        """Another application this process is applying ``obj`` for, if it still exists."""
        other = self.claims.get((cluster, obj_key(obj, namespace)))
        if other is None or other.uid == me.uid or not self.exists(other):
            return None
        return other

    async def apply(
        self,
        kube: KubeCluster,
        cluster: ClusterKey,
        manifest: list[Obj],
        namespace: str,
        me: Owner,
        *,
        recorded: set[tuple[str, str, str | None, str]],
        overwrite: bool,
    ) -> Applied:
        """Apply ``manifest`` as ``me``'s, or raise ``KubeFailure(CONFLICT)`` naming the owner.

        Each object is claimed from its check until its apply has answered (the
        answer, with our labels, is then what the watch cache holds), so two
        workers never both find it free.
        """
        marked = [owned(obj, me) for obj in manifest]
        claimed: list[Claim] = []
        try:
            taken = await self._check(kube, cluster, marked, namespace, me, claimed,
                                      recorded=recorded, overwrite=overwrite)  # fmt: skip
            namespaces = {namespace} | {
                str(o["metadata"]["namespace"]) for o in marked if o["metadata"].get("namespace")
            }
            for ns in sorted(namespaces):
                await kube.ensure_namespace(ns)
            lives: list[Obj | None] = []
            for obj in marked:
                seen = obj_key(obj, namespace)
                if self.watches is not None:
                    self.watches.applying(cluster, seen, (me.namespace, me.name))
                try:
                    result = await kube.apply(obj, namespace)
                except BaseException as error:
                    if self.watches is not None:
                        self.watches.observe(cluster, seen, None)
                    if isinstance(error, KubeApiError) and error.status == 404:
                        kube.namespaces.clear()  # a namespace may have gone: ask again
                    raise
                if self.watches is not None:
                    self.watches.observe(cluster, seen, result)
                lives.append(result)
            return Applied(lives, taken)
        finally:
            for key in claimed:
                if self.claims.get(key) == me:
                    del self.claims[key]

    async def _check(
        self,
        kube: KubeCluster,
        cluster: ClusterKey,
        marked: list[Obj],
        namespace: str,
        me: Owner,
        claimed: list[Claim],
        *,
        recorded: set[tuple[str, str, str | None, str]],
        overwrite: bool,
    ) -> list[Taken]:
        """Refuse or claim each object; the objects taken over from another owner."""
        taken: list[Taken] = []
        for obj in marked:
            live = await self.read(kube, cluster, obj, namespace)
            other = self._claimed(cluster, obj, namespace, me)
            if other is not None and (live is None or owner_of(live) is None):
                live = owned(obj, other)  # being applied for another application
            why = refusal(obj, live, me, recorded=ident(obj) in recorded, overwrite=overwrite,
                          exists=self.exists)  # fmt: skip
            if why is not None:
                raise KubeFailure(ReasonCode.CONFLICT, f"{why} on cluster {cluster[1]}")
            previous = former_owner(live, me, self.exists)
            if previous is not None:
                taken.append(Taken(describe(obj), previous))
            key = (cluster, obj_key(obj, namespace))
            self.claims[key] = me
            claimed.append(key)
        return taken

    async def delete(
        self,
        kube: KubeCluster,
        cluster: ClusterKey,
        objects: list[Obj],
        namespace: str,
        me: Owner,
    ) -> int:
        """Delete those of ``objects`` that ``me`` owns; how many a DELETE removed now.

        A deletion is done once a pass removes nothing (the watch or a read no
        longer shows the objects).

        Only objects that carry ``me``'s owner label (or its annotation, where
        labels were cut) are its own: one without an owner, or of another
        owner, is left alone, whatever the application's status lists.
        """
        removed = 0
        for obj in objects:
            live = await self.read(kube, cluster, obj, namespace)
            if not mine(live, me):
                if live is not None:
                    log.info(
                        "%s on %s is not %s's (owner: %s): left alone",
                        describe(obj), cluster[1], me, owner_of(live),
                    )  # fmt: skip
                continue
            assert live is not None
            uid = (live.get("metadata") or {}).get("uid")
            removed += await kube.delete(obj, namespace, uid=uid if isinstance(uid, str) else None)
        return removed


def unreachable(error: KubeUnreachable | KubeApiError, code: ReasonCode) -> KubeFailure:
    """The failure an I/O error gives: ``CLUSTER_NOT_REACHABLE`` or ``code``."""
    if isinstance(error, KubeUnreachable):
        return KubeFailure(ReasonCode.CLUSTER_NOT_REACHABLE, str(error))
    return KubeFailure(code, str(error))
