"""Deploying an application on several clusters: one copy per placement, grown before shrunk.

The scheduler writes ``status.placements`` (each cluster and its share); this
module gives each cluster its copy (``shoal.model.placement.copy_for``: its
share of the replicas, and the overrides that match its labels) and records
what runs there in ``status.copies``, from which the API derives each
placement's ready replicas and state.

A change moves replicas without losing any: the copies that gain (a new
cluster, a larger share, a new manifest) are applied first, and only when
every one of them is ready are the copies that lose shrunk and those of
clusters no longer used removed. A cluster that does not answer then keeps
its copy in ``status.pending_cleanups`` until it does (as after a migration).
The application is RUNNING when every placement's copy is ready.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from shoal.client.informer import cache_key
from shoal.client.kube import KubeApiError, KubeUnreachable
from shoal.copies import observing
from shoal.copies.member import KubeFailure
from shoal.copies.namespaces import to_record as namespaces_to_record
from shoal.copies.objects import (
    combined_health,
    ident,
    merge_cleanup,
    outside,
    ref_key,
    workload_health,
)
from shoal.copies.owners import Owner, owned
from shoal.events import reasons
from shoal.machinery.types import Obj
from shoal.model.base import Reason, ReasonCode, ResourceRef
from shoal.model.kubernetes import (
    KUBE_FINALIZER,
    Application,
    ApplicationState,
    ContainerHealth,
    CopyStatus,
    PlacementStatus,
)
from shoal.model.placement import REPLICA_FIELDS, copy_for, desired_replicas

if TYPE_CHECKING:
    from shoal.kube.controller import KubeController

log = logging.getLogger(__name__)

RETRY = 2.0
"""Seconds before a copy that failed (its cluster does not answer) is tried again; the
scheduler moves its share meanwhile."""


def _grows(placement: PlacementStatus, copy: CopyStatus | None) -> bool:
    """Its copy gains replicas (or is new): applied in the first step."""
    if copy is None:
        return True
    if placement.replicas is None or copy.replicas is None:
        return True
    return placement.replicas >= copy.replicas


def manifests(controller: KubeController, app: Application) -> list[list[Obj]]:
    """Each placement's copy of the manifest, in the order of ``status.placements``."""
    placements = app.status.placements
    shares = [p.replicas for p in placements]
    overrides = app.spec.placement.overrides if app.spec.placement is not None else []
    out = []
    for index, placement in enumerate(placements):
        cluster = controller._cluster(placement.cluster)
        labels = dict(cluster.metadata.labels) if cluster is not None else {}
        out.append(copy_for(controller.desired(app), shares, index, labels, overrides))
    return out


async def _apply(
    controller: KubeController,
    app: Application,
    ref: ResourceRef,
    manifest: list[Obj],
    phase: ApplicationState,
) -> tuple[bool, int, ContainerHealth]:
    """Apply one cluster's copy if it changed (or drifted); whether it is ready, and counts."""
    key = cache_key(app)
    where = ref_key(ref)
    namespace = controller._namespace_on(app, ref)
    me = Owner.of(app)
    code = ReasonCode.CREATE_FAILED if phase is ApplicationState.CREATING else (
        ReasonCode.RECONCILE_FAILED)  # fmt: skip
    if outside(app, ref):  # checked where it acts, whatever wrote the placement
        raise KubeFailure(code, "a cluster outside the application's namespace: not deployed")
    kube = await controller._kube(ref, code)
    applied = controller.copies_applied.get((key, where))
    schemas = observing.schemas(app, manifest)  # the same rules as one copy, for each
    manifest = observing.to_apply(manifest, schemas, applied or [])
    try:
        if applied == manifest:
            marked = [owned(obj, me) for obj in manifest]
            lives = await controller.members.read_all(kube, where, marked, namespace)
            baseline = controller.copies_baseline.get((key, where), {})
            drifted = [
                ident(obj)[1:] for obj, live in zip(marked, lives, strict=True)
                if observing.drifted(schemas, baseline, obj, live)
            ]  # fmt: skip
            if not drifted:
                controller.copies_observed[(key, where)] = observing.last_observed(
                    schemas, manifest, lives
                )
                return _health(manifest, lives)
            changed = ", ".join(f"{kind} {name}" for kind, _, name in drifted)
            log.info("application %s/%s: %s changed on %s by someone else; applying again",
                     app.metadata.namespace, app.metadata.name, changed, ref.name)  # fmt: skip
            controller.drift_repairs += 1
        # what its status says it runs there (imported from Krake) is labelled its own
        recorded = {ident(obj) for obj in app.status.last_applied_manifest} if any(
            ref_key(c.cluster) == where for c in app.status.copies) else set()  # fmt: skip
        done = await controller.members.apply(
            kube, where, manifest, namespace, me,
            recorded=recorded, overwrite=app.spec.conflict_resolution == "overwrite",
        )  # fmt: skip
    except (KubeUnreachable, KubeApiError) as error:
        if isinstance(error, KubeUnreachable):
            raise KubeFailure(ReasonCode.CLUSTER_NOT_REACHABLE, str(error)) from error
        raise KubeFailure(code, f"cluster {ref.name}: {error}") from error
    manifest = observing.recorded(manifest, schemas, done.lives)
    controller.copies_applied[(key, where)] = manifest
    controller.copies_baseline[(key, where)] = observing.baseline(schemas, manifest, done.lives)
    controller.copies_observed[(key, where)] = observing.last_observed(
        schemas, manifest, done.lives
    )
    for taken in done.taken:
        reasons.took_over(controller.events, app, taken.what, taken.owner.name, ref.name)
    return _health(manifest, done.lives)


def _health(manifest: list[Obj], lives: list[Obj | None]) -> tuple[bool, int, ContainerHealth]:
    ready, health = combined_health(lives)
    first = next(
        (live for obj, live in zip(manifest, lives, strict=True)
         if obj.get("kind") in REPLICA_FIELDS),
        None,
    )  # fmt: skip
    if first is None:  # not there (yet), or nothing replicated
        return ready, 0, health
    pods = workload_health(first)[1]  # a Job's ready replicas: its running and finished pods
    return ready, pods.running_pods + pods.completed_pods, health


async def deploy(controller: KubeController, app: Application) -> None:
    """Bring every placement's copy to its share: grow first, then shrink and remove."""
    key = cache_key(app)
    if KUBE_FINALIZER not in app.metadata.finalizers:
        # stored before anything is applied: a deletion then always waits for the clean-up
        app = await controller._set_finalizers(app, [*app.metadata.finalizers, KUBE_FINALIZER])
    status = app.status
    if any(outside(app, p.cluster) for p in status.placements):
        raise KubeFailure(
            ReasonCode.CREATE_FAILED,
            f"a placement names a cluster outside the application's namespace "
            f"{app.metadata.namespace!r}: not deployed",
        )
    # where the objects without a namespace go on each cluster, recorded before any apply
    record = namespaces_to_record(app, [p.cluster for p in status.placements], controller._cluster)
    if record is not None:
        app = await controller._write(app, {"kube_namespaces": record})
        status = app.status
    copies = {ref_key(c.cluster): c for c in status.copies}
    running = status.running_on
    if not copies and running is not None:  # it ran on one cluster: that copy is one of them
        ran = desired_replicas(status.last_applied_manifest)  # shrunk only after the others grew
        copies[ref_key(running)] = CopyStatus(cluster=running, replicas=ran,
                                              state=ApplicationState.RUNNING)  # fmt: skip
    wanted = {ref_key(p.cluster) for p in status.placements}
    leaving = [c for where, c in copies.items() if where not in wanted]
    first_time = not copies
    phase = ApplicationState.CREATING if first_time else ApplicationState.RECONCILING
    if any(copies.get(ref_key(p.cluster)) is None for p in status.placements) and not first_time:
        phase = ApplicationState.MIGRATING
    copied = manifests(controller, app)

    new_copies: dict[Any, CopyStatus] = dict(copies)
    health = ContainerHealth()
    failures: list[str] = []
    failure_code: ReasonCode | None = None
    first_step: list[tuple[PlacementStatus, list[Obj]]] = []
    second_step: list[tuple[PlacementStatus, list[Obj]]] = []
    for placement, manifest in zip(status.placements, copied, strict=True):
        grows = _grows(placement, copies.get(ref_key(placement.cluster)))
        (first_step if grows else second_step).append((placement, manifest))

    async def bring(steps: list[tuple[PlacementStatus, list[Obj]]]) -> bool:
        nonlocal failure_code
        ready_all = True
        for placement, manifest in steps:
            where = ref_key(placement.cluster)
            try:
                ready, count, part = await _apply(controller, app, placement.cluster, manifest,
                                                  phase)  # fmt: skip
            except KubeFailure as failure:
                ready_all = False
                failures.append(f"{placement.cluster.name}: {failure}")
                failure_code = failure_code or failure.code
                before = copies.get(where)
                new_copies[where] = CopyStatus(
                    cluster=placement.cluster,
                    replicas=before.replicas if before is not None else placement.replicas,
                    ready_replicas=before.ready_replicas if before is not None else 0,
                    state=ApplicationState.DEGRADED,
                    reason=Reason(code=failure.code, message=str(failure)[:500]),
                )
                continue
            _add(health, part)
            ready_all = ready_all and ready
            new_copies[where] = CopyStatus(
                cluster=placement.cluster,
                replicas=placement.replicas,
                ready_replicas=count,
                state=ApplicationState.RUNNING if ready else phase,
            )
        return ready_all

    grown = await bring(first_step)
    cleanups = list(status.pending_cleanups)
    if grown:
        shrunk = await bring(second_step)
        if leaving and not await controller._shut_down_first(app, [c.cluster for c in leaving]):
            return  # their workloads are asked to shut down first (Krake's shutdown hook)
        for copy in leaving:  # clusters no longer used: their copies go now
            left = await controller._remove_from_old(app, copy.cluster)
            if left is not None:
                cleanups = merge_cleanup(cleanups, left)
            new_copies.pop(ref_key(copy.cluster), None)
        all_ready = shrunk
    else:
        all_ready = False
        for placement, _ in second_step:  # still running as before: counted as they are
            before = copies.get(ref_key(placement.cluster))
            if before is not None:
                health.running_pods += before.ready_replicas
    order = [ref_key(p.cluster) for p in status.placements]
    written = [new_copies[w] for w in order if w in new_copies]
    written += [c for w, c in new_copies.items() if w not in order]
    fields: dict[str, Any] = {
        "copies": written,
        "container_health": health,
        "pending_cleanups": cleanups,
    }
    not_ready = [
        c.cluster.name for c in written
        if c.state is not ApplicationState.RUNNING or ref_key(c.cluster) not in wanted
    ]  # fmt: skip
    if all_ready and not not_ready:
        first = status.placements[0].cluster
        if status.deploy_state is not ApplicationState.RUNNING:
            reasons.deployed(controller.events, app, _names(status.placements), health)
        fields.update(
            deploy_state=ApplicationState.RUNNING,
            deploy_reason=None,
            running_on=first,
            last_applied_manifest=controller.desired(app),
            # what runs on the first placement's cluster, as for one copy
            last_observed_manifest=controller.copies_observed.get((key, ref_key(first)), []),
            retries=None,
            shutdown_grace_period=None,
        )
        await controller._write(app, fields)
        controller.failures.pop(key, None)
        controller.queue.add_after(key, controller.resync)
        return
    fields["deploy_state"] = phase  # a placement is not ready yet: not RUNNING
    if failures:
        message = f"placements not ready: {'; '.join(failures)}"
        fields["deploy_reason"] = Reason(
            code=failure_code or ReasonCode.KUBERNETES_ERROR, message=message[:1000]
        )
    else:
        fields["deploy_reason"] = None
    await controller._write(app, fields)
    if failures:
        delay = RETRY
    elif controller.watches is not None:  # readiness comes with the watch events
        delay = max(controller.poll_interval, controller.fallback)
    else:
        delay = controller.poll_interval
    controller.queue.add_after(key, delay)


def _add(total: ContainerHealth, part: ContainerHealth) -> None:
    total.desired_pods += part.desired_pods
    total.running_pods += part.running_pods
    total.completed_pods += part.completed_pods
    total.failed_pods += part.failed_pods


def _names(placements: list[PlacementStatus]) -> str:
    return ", ".join(p.cluster.name for p in placements)


async def withdraw(controller: KubeController, app: Application) -> None:
    """No placement left (it waits): remove the copies from clusters being deleted."""
    cleanups = list(app.status.pending_cleanups)
    keep: list[CopyStatus] = []
    for copy in app.status.copies:
        cluster = controller._cluster(copy.cluster)
        if cluster is None or cluster.metadata.deleted is None:
            keep.append(copy)
            continue
        left = await controller._remove_from_old(app, copy.cluster)
        if left is not None:
            cleanups = merge_cleanup(cleanups, left)
        log.info("application %s/%s: withdrawn from %s, which is being deleted",
                 app.metadata.namespace, app.metadata.name, copy.cluster.name)  # fmt: skip
    fields: dict[str, Any] = {"copies": keep, "pending_cleanups": cleanups}
    if not keep:
        fields.update(running_on=None, deploy_state=None)
    await controller._write(app, fields)


def withdrawn(controller: KubeController, app: Application) -> bool:
    """Placed nowhere now, while a copy still runs on a cluster being deleted."""
    if app.status.placements or app.status.scheduled_to is not None:
        return False
    for copy in app.status.copies:
        cluster = None if outside(app, copy.cluster) else controller._cluster(copy.cluster)
        if cluster is not None and cluster.metadata.deleted is not None:
            return True
    return False
