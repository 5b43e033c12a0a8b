"""The applier of one member cluster: runs the copies of applications given to it there.

It takes a ``CopySpec`` (``shoal.model.copies``: what to run, computed by the hub's
planner) and answers a ``CopyReport``. It reads and writes the member cluster only, never
Shoal's API: the hub runs one per cluster it holds credentials of (push), and the same
class can run beside a member cluster with that cluster's own credentials (pull).

Per copy it keeps what it applied last and the observation right after (``observing``):
a copy applied already is only read, and applied again when someone else changed it
(drift). After a restart it goes on from the copy's last recorded observation when the
cluster still matches it (``CopySpec.observed``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from shoal.client.kube import ClusterKey, KubeApiError, KubeCluster, KubeUnreachable
from shoal.copies import observing
from shoal.copies.member import Applied, Members, obj_key, unreachable
from shoal.copies.objects import combined_health, ident, workload_health
from shoal.copies.owners import LABEL_UID, Owner, owned, owner_of
from shoal.machinery.types import Obj
from shoal.model.base import ReasonCode, ResourceRef
from shoal.model.copies import CopyReport, CopySpec, Taken
from shoal.model.kubernetes import ApplicationState
from shoal.model.placement import REPLICA_FIELDS

log = logging.getLogger(__name__)

PRUNED_KINDS = (
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
)
"""Kinds a cluster is searched for objects left behind when the hub or its agent connects,
beside every kind that an application's manifest names."""

Timer = Callable[[str, Awaitable[Applied]], Awaitable[Applied]]
"""Wraps each apply (the hub's metrics time them); the applier itself measures nothing."""


def owner(spec: CopySpec) -> Owner:
    """The owner the copy's objects are labelled with."""
    return Owner(spec.app_namespace, spec.app_name, spec.app_uid)


class NoAddress(Exception):
    """The copy's workload cannot be reached from outside its cluster: why."""


@dataclass
class _State:
    """A copy as last applied (observed fields recorded) and observed right after."""

    applied: list[Obj]
    baseline: observing.Baseline
    observed: list[Obj]


async def _untimed(cluster: str, work: Awaitable[Applied]) -> Applied:
    return await work


@dataclass(eq=False)
class Applier:
    """One member cluster's applier; ``members`` does the object I/O (shared by the
    appliers of one process: its claims and watch cache span clusters)."""

    kube: KubeCluster
    cluster: ResourceRef
    members: Members
    timed: Timer = _untimed
    drift_repairs: int = 0  # counted before the apply that repairs, as soon as it is seen
    _copies: dict[str, _State] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> ClusterKey:
        return (self.cluster.namespace, self.cluster.name)

    def forget(self, uid: str) -> None:
        """The copy of application ``uid`` is gone from here (or its application is)."""
        self._copies.pop(uid, None)

    async def apply(self, spec: CopySpec, code: ReasonCode) -> CopyReport:
        """Bring the copy to ``spec``: apply it when it changed or drifted, else only read it.

        A failure raises ``KubeFailure``: ``CLUSTER_NOT_REACHABLE``, ``CONFLICT`` (another
        application owns an object), else ``code`` (``KUBERNETES_ERROR`` for a read).
        """
        me = owner(spec)
        schemas = spec.observer_schema or observing.default_schemas(spec.manifest)
        state = self._copies.get(me.uid)
        manifest = observing.to_apply(
            spec.manifest, schemas, state.applied if state is not None else spec.previous
        )
        marked = [owned(obj, me) for obj in manifest]
        applying = False
        try:
            if state is None and spec.observed and spec.previous == manifest:
                state = await self._resume(spec, me, marked, manifest)
            drifted: list[str] = []
            if state is not None and state.applied == manifest:
                lives = await self.members.read_all(self.kube, self.key, marked,
                                                    spec.kube_namespace)  # fmt: skip
                drifted = [
                    f"{kind} {name}" for obj, live in zip(marked, lives, strict=True)
                    if observing.drifted(schemas, state.baseline, obj, live)
                    for _, kind, _, name in [ident(obj)]
                ]  # fmt: skip
                if not drifted:
                    state.observed = observing.last_observed(schemas, manifest, lives)
                    return self._report(spec, state, lives, applied=False)
                log.info("application %s/%s: %s changed on %s by someone else; applying again",
                         me.namespace, me.name, ", ".join(drifted), self.cluster.name)  # fmt: skip
                self.drift_repairs += 1
            applying = True
            done = await self.timed(self.cluster.name, self.members.apply(
                self.kube, self.key, manifest, spec.kube_namespace, me,
                recorded={ident(obj) for obj in spec.own},
                overwrite=spec.overwrite,
            ))  # fmt: skip
            manifest = observing.recorded(manifest, schemas, done.lives)
            state = _State(manifest, observing.baseline(schemas, manifest, done.lives),
                           observing.last_observed(schemas, manifest, done.lives))  # fmt: skip
            if spec.prune:  # what the manifest no longer has
                keep = {obj_key(obj, spec.kube_namespace) for obj in manifest}
                stale = [o for o in spec.previous if obj_key(o, spec.kube_namespace) not in keep]
                await self.members.delete(self.kube, self.key, stale, spec.kube_namespace, me)
        except (KubeUnreachable, KubeApiError) as error:
            raise unreachable(error, code if applying else ReasonCode.KUBERNETES_ERROR) from error
        self._copies[me.uid] = state
        report = self._report(spec, state, done.lives, applied=True)
        report.drifted = drifted
        report.taken = [Taken(what=t.what, owner=t.owner.name) for t in done.taken]
        for taken in done.taken:
            log.warning("application %s/%s takes over %s from %s (conflict_resolution: "
                        "overwrite)", me.namespace, me.name, taken.what, taken.owner)  # fmt: skip
        return report

    async def _resume(
        self, spec: CopySpec, me: Owner, marked: list[Obj], manifest: list[Obj]
    ) -> _State | None:
        """After a restart: the copy as its last observation says, when what runs matches
        it (``observing.resumed``); None when it must be applied."""
        lives = await self.members.read_all(self.kube, self.key, marked, spec.kube_namespace)
        schemas = spec.observer_schema or observing.default_schemas(spec.manifest)
        base = observing.resumed(schemas, marked, lives, spec.observed)
        if base is None:
            return None
        state = _State(manifest, base, spec.observed)
        self._copies[me.uid] = state
        return state

    def _report(
        self, spec: CopySpec, state: _State, lives: list[Obj | None], *, applied: bool
    ) -> CopyReport:
        ready, health = combined_health(lives)
        first = next(
            (live for obj, live in zip(state.applied, lives, strict=True)
             if obj.get("kind") in REPLICA_FIELDS),
            None,
        )  # fmt: skip
        pods = workload_health(first)[1] if first is not None else None
        services = {
            str((live.get("metadata") or {}).get("name")): address
            for live in lives
            if live is not None and live.get("kind") == "Service"
            and (address := service_address(live, str(self.kube.api.configuration.host)))
        }  # fmt: skip
        return CopyReport.model_construct(
            cluster=self.cluster,
            replicas=spec.replicas,
            # a Job's ready replicas: its running and finished pods
            ready_replicas=pods.running_pods + pods.completed_pods if pods is not None else 0,
            state=ApplicationState.RUNNING if ready else None,
            reason=None,
            ready=ready,
            health=health,
            services=services,
            last_applied_manifest=state.applied,
            last_observed_manifest=state.observed,
            applied=applied,
            drifted=[],
            taken=[],
        )

    async def remove(self, spec: CopySpec, *, whole: bool = True) -> int:
        """Delete the copy's objects (``spec.manifest``) that its application owns here; how
        many a DELETE removed now (0: none is left). ``whole``: the copy goes (not only
        what its manifest no longer has). Raises ``KubeUnreachable`` or ``KubeApiError``."""
        me = owner(spec)
        if whole:
            self.forget(me.uid)
        return await self.members.delete(
            self.kube, self.key, spec.manifest, spec.kube_namespace, me
        )

    async def prune(self, kinds: set[tuple[str, str]], keep: Callable[[Owner], bool]) -> int:
        """Delete the objects of ``kinds`` that carry Shoal's owner label, whose application
        is of this cluster's namespace and not one ``keep`` names; how many were deleted.

        A server another namespace's cluster also names (a cluster both tenants reach)
        holds that namespace's objects, never this cluster's: those are left alone.
        """
        found: list[tuple[str, Obj]] = []  # (collection path, object)
        for api_version, kind in sorted(kinds):
            try:
                info = await self.kube.resource(api_version, kind)
                base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
                listed = await self.kube.request(
                    "GET", f"{base}/{info.plural}", query={"labelSelector": LABEL_UID}
                )
            except KubeApiError:
                continue  # a kind this cluster does not serve
            for obj in listed.get("items") or []:
                namespace = (obj.get("metadata") or {}).get("namespace")
                path = f"{base}/namespaces/{namespace}" if namespace else base
                found.append((f"{path}/{info.plural}", obj))
        pruned = 0
        for path, obj in found:
            found_owner = owner_of(obj)
            if found_owner is None or found_owner.namespace != self.cluster.namespace:
                continue
            if keep(found_owner):
                continue
            meta = obj.get("metadata") or {}
            # that very object: one made again under its name since the list stays (409)
            body = {"preconditions": {"uid": meta["uid"]}} if meta.get("uid") else None
            with contextlib.suppress(KubeApiError):
                await self.kube.request("DELETE", f"{path}/{meta.get('name')}", body=body)
                pruned += 1
        return pruned

    async def shutdown_address(self, spec: CopySpec) -> str:
        """``host:port`` of the workload's Service (the one named ``shutdown``, else the
        copy's first Service), where Krake's shutdown hook is called. Raises
        ``NoAddress`` saying why there is none, ``KubeUnreachable`` or ``KubeApiError``."""
        services = [o for o in spec.manifest if o.get("kind") == "Service"]
        services.sort(key=lambda o: (o.get("metadata") or {}).get("name") != "shutdown")
        if not services:
            raise NoAddress("its manifest has no Service")
        live = await self.kube.read(services[0], spec.kube_namespace)
        address = service_address(live, str(self.kube.api.configuration.host))
        if address is None:
            raise NoAddress("its Service has no node port or load balancer address")
        return address


def service_address(service: Obj | None, cluster_url: str) -> str | None:
    """``host:port`` of a Service from outside its cluster: a load balancer's address and
    port, else the cluster's host and the first node port (Krake's ``services`` entry)."""
    if service is None:
        return None
    spec = service.get("spec") or {}
    ports = spec.get("ports") or [{}]
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if spec.get("type") == "LoadBalancer" and ingress and ports[0].get("port"):
        return f"{ingress[0].get('ip') or ingress[0].get('hostname')}:{ports[0]['port']}"
    node_port = ports[0].get("nodePort")
    host = urlsplit(cluster_url).hostname
    return f"{host}:{node_port}" if node_port and host else None
