"""Deploying an application: each copy applied by its cluster's applier, grown before shrunk.

The planner (``kube.planner``) gives each cluster the application is placed on its copy:
the whole manifest on the one cluster it is bound to (``status.scheduled_to``), else each
placement's share of the replicas with the overrides that match the cluster's labels
(``status.placements``). Each copy is applied by its cluster's ``Applier``
(``shoal.copies.applier``), which answers how it runs there.

A change moves replicas without losing any: the copies that gain (a new cluster, a larger
share, a new manifest) are applied first, and only when every one of them is ready are the
copies that lose shrunk and those of clusters no longer used removed (their workloads asked
to shut down first, when the application has Krake's shutdown hook). A cluster that does
not answer then keeps its copy in ``status.pending_cleanups`` until it does.

What the status says is a projection of the copies' reports, in the fields Krake's clients
read: ``running_on`` (the first copy's cluster), ``last_applied_manifest`` and
``last_observed_manifest``; ``status.copies`` lists each copy of an application placed on
several clusters, from which the API derives each placement's ready replicas and state.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

from shoal.client.informer import CacheKey, cache_key
from shoal.copies import observing
from shoal.copies.member import KubeFailure
from shoal.copies.namespaces import to_record as namespaces_to_record
from shoal.copies.objects import merge_cleanup, outside, ref_key
from shoal.events import reasons
from shoal.kube import planner
from shoal.kube.hooks import HOOKS
from shoal.kube.hub import Hub
from shoal.kube.removal import remove_from_old, shut_down_first
from shoal.machinery.types import Obj
from shoal.model.application_status import runs_on
from shoal.model.base import Reason, ReasonCode
from shoal.model.copies import CopyReport, CopySpec
from shoal.model.kubernetes import (
    KUBE_FINALIZER,
    Application,
    ApplicationState,
    ContainerHealth,
    CopyStatus,
)
from shoal.model.placement import desired_replicas

log = logging.getLogger(__name__)

RETRY = 2.0
"""Seconds before a copy that failed (its cluster does not answer) is tried again; the
scheduler moves its share meanwhile."""


def _phase(app: Application, specs: list[CopySpec]) -> tuple[ApplicationState, ReasonCode]:
    """The state the application is in while its copies are applied, and the reason code
    of a failure meanwhile (one copy that changed nothing: RUNNING, see ``_one_waits``)."""
    had = {ref_key(ref) for ref in runs_on(app.status)}
    if not had:
        return ApplicationState.CREATING, ReasonCode.CREATE_FAILED
    if any(ref_key(spec.cluster) not in had for spec in specs):
        return ApplicationState.MIGRATING, ReasonCode.CREATE_FAILED
    return ApplicationState.RECONCILING, ReasonCode.RECONCILE_FAILED


def _changed(app: Application, spec: CopySpec) -> bool:
    """The one copy applies something else than its status says it applied."""
    manifest = observing.to_apply(spec.manifest, spec.observer_schema, spec.previous)
    return manifest != app.status.last_applied_manifest


def _grows(spec: CopySpec, copy: CopyStatus | None) -> bool:
    """Its copy gains replicas (or is new): applied in the first step."""
    if copy is None or spec.replicas is None or copy.replicas is None:
        return True
    return spec.replicas >= copy.replicas


def _existing(app: Application) -> dict[CacheKey, CopyStatus]:
    """The copies the application runs now, by cluster (one it ran whole counts as one)."""
    status = app.status
    copies = {ref_key(c.cluster): c for c in status.copies}
    running = status.running_on
    if not copies and running is not None and status.placements:
        ran = desired_replicas(status.last_applied_manifest)  # shrunk only after the others grew
        copies[ref_key(running)] = CopyStatus(cluster=running, replicas=ran,
                                              state=ApplicationState.RUNNING)  # fmt: skip
    return copies


async def nothing_to_deploy(hub: Hub, app: Application) -> None:
    """An application whose manifest is empty (stored before the API turned templates
    into manifests) waits with a reason, never RUNNING with nothing running; an update
    that gives it objects deploys it."""
    message = ("nothing to deploy: spec.manifest is empty (an application given as a "
               "TOSCA template or CSAR gets its manifest when it is written: update it)")
    reason = Reason(code=ReasonCode.INVALID_TOSCA_MANIFEST, message=message)
    status = app.status
    if status.deploy_state is None and status.deploy_reason == reason:
        return
    await hub.write(app, {"deploy_state": None, "deploy_reason": reason})


async def with_tokens(hub: Hub, app: Application) -> Application:
    """Each hook's token, made once and stored before the first apply that uses it."""
    status = app.status
    missing = {f"{hook}_token": secrets.token_urlsafe(32) for hook in HOOKS
               if hook in app.spec.hooks and getattr(status, f"{hook}_token") is None}
    return await hub.write(app, missing) if missing else app


async def deploy(hub: Hub, app: Application) -> None:
    """Bring every copy to its spec: grow first, then shrink and remove; write the status."""
    if KUBE_FINALIZER not in app.metadata.finalizers:
        # stored before anything is applied: a deletion then always waits for the clean-up
        app = await hub.set_finalizers(app, [*app.metadata.finalizers, KUBE_FINALIZER])
    refs = [ref for ref, _ in planner.placed(app)]
    if any(outside(app, ref) for ref in refs):
        # The API refuses such a binding, and the field to tenants; a store written some
        # other way is not trusted with another tenant's cluster credentials.
        code = ReasonCode.CREATE_FAILED if app.status.running_on is None else (
            ReasonCode.RECONCILE_FAILED)  # fmt: skip
        raise KubeFailure(code, f"a cluster it is placed on is outside the application's "
                                f"namespace {app.metadata.namespace!r}: not deployed")  # fmt: skip
    # where the objects without a namespace go on each cluster, recorded before any apply
    record = namespaces_to_record(app, refs, hub.cluster)
    if record is not None:
        app = await hub.write(app, {"kube_namespaces": record})
    specs = hub.plan(app)
    phase, code = _phase(app, specs)
    copies = _existing(app)
    several = bool(app.status.placements)
    first: list[CopySpec] = []
    second: list[CopySpec] = []
    for spec in specs:
        (first if _grows(spec, copies.get(ref_key(spec.cluster))) else second).append(spec)
    run = _Run(hub, app, phase, code, several)
    grown = await run.bring(first)
    if not several and not grown:
        await _one_waits(hub, app, run, specs[0])
        return
    cleanups = list(app.status.pending_cleanups)
    if grown:
        all_ready = await run.bring(second)
        leaving = planner.leaving(app)
        if leaving and not await shut_down_first(hub, app, leaving):
            return  # their workloads are asked to shut down first (Krake's shutdown hook)
        for ref in leaving:  # clusters no longer used: their copies go now
            left = await remove_from_old(hub, app, ref)
            if left is not None:
                cleanups = merge_cleanup(cleanups, left)
            copies.pop(ref_key(ref), None)
    else:
        all_ready = False
        for spec in second:  # still running as before: counted as they are
            before = copies.get(ref_key(spec.cluster))
            if before is not None:
                run.health.running_pods += before.ready_replicas
    if several:
        await _several_written(hub, run, copies, cleanups, all_ready)
    else:
        await _one_runs(hub, run, specs[0], cleanups)


class _Run:
    """One pass over an application's copies: what each reported, or why it failed."""

    def __init__(self, hub: Hub, app: Application, phase: ApplicationState, code: ReasonCode,
                 several: bool) -> None:  # fmt: skip
        self.hub, self.app, self.phase, self.code, self.several = hub, app, phase, code, several
        self.reports: dict[CacheKey, CopyReport] = {}
        self.copies: dict[CacheKey, CopyStatus] = {}
        self.failures: list[str] = []
        self.failure_code: ReasonCode | None = None
        self.health = ContainerHealth()

    async def bring(self, specs: list[CopySpec]) -> bool:
        """Apply each copy, every cluster at once (a copy on 100 clusters waits for the
        slowest, not for the sum); whether every one is ready. A failed copy of several is
        recorded DEGRADED (the others go on); the one copy's failure is raised."""
        if len(specs) == 1:
            outcomes: list[CopyReport | BaseException] = [await self.apply(specs[0])]
        else:
            outcomes = await asyncio.gather(*(self.apply(spec) for spec in specs),
                                            return_exceptions=True)  # fmt: skip
        ready_all = True
        for spec, report in zip(specs, outcomes, strict=True):
            where = ref_key(spec.cluster)
            if isinstance(report, KubeFailure):
                if not self.several:
                    raise report
                ready_all = False
                self.failed(spec, report)
                continue
            if isinstance(report, BaseException):
                raise report
            self.reports[where] = report
            _add(self.health, report.health)
            ready_all = ready_all and report.ready
            if self.several:
                self.copies[where] = CopyStatus(
                    cluster=spec.cluster,
                    replicas=spec.replicas,
                    ready_replicas=report.ready_replicas,
                    state=ApplicationState.RUNNING if report.ready else self.phase,
                )
        return ready_all

    async def apply(self, spec: CopySpec) -> CopyReport:
        hub, app = self.hub, self.app
        if outside(app, spec.cluster):  # checked where it acts, whatever wrote the placement
            raise KubeFailure(self.code, "a cluster outside the application's namespace: "
                                         "not deployed")  # fmt: skip
        applier = await hub.applier(spec.cluster, self.code)
        report = await applier.apply(spec, self.code)
        if report.applied:
            hub.applied_at[cache_key(app)] = asyncio.get_running_loop().time()
        for taken in report.taken:
            reasons.took_over(hub.events, app, taken.what, taken.owner, spec.cluster.name)
        return report

    def failed(self, spec: CopySpec, failure: KubeFailure) -> None:
        self.failures.append(f"{spec.cluster.name}: {failure}")
        self.failure_code = self.failure_code or failure.code
        before = next((c for c in self.app.status.copies if c.cluster == spec.cluster), None)
        self.copies[ref_key(spec.cluster)] = CopyStatus(
            cluster=spec.cluster,
            replicas=before.replicas if before is not None else spec.replicas,
            ready_replicas=before.ready_replicas if before is not None else 0,
            state=ApplicationState.DEGRADED,
            reason=Reason(code=failure.code, message=str(failure)[:500]),
        )


def _add(total: ContainerHealth, part: ContainerHealth) -> None:
    total.desired_pods += part.desired_pods
    total.running_pods += part.running_pods
    total.completed_pods += part.completed_pods
    total.failed_pods += part.failed_pods


async def _one_waits(hub: Hub, app: Application, run: _Run, spec: CopySpec) -> None:
    """The one copy is not ready yet: its progress, unless it is new and has a second."""
    key = cache_key(app)
    phase, status = run.phase, app.status
    # Most new workloads are ready within a second: CREATING is not worth a status write
    # (and an event to every watcher) of its own before then.
    waited = asyncio.get_running_loop().time() - hub.applied_at.get(key, 0.0)
    creating = phase is ApplicationState.CREATING and status.deploy_state is not phase
    if creating and waited < hub.progress_delay:
        hub.queue.add_after(key, hub.progress_delay - waited)
        return
    progress: dict[str, Any] = {"container_health": run.health, "deploy_reason": None}
    if phase is not ApplicationState.RECONCILING or _changed(app, spec):
        progress["deploy_state"] = phase  # a copy that runs as applied keeps its state
    await hub.write(app, progress)
    watched = hub.watches is not None and hub.watches.watched(key, ref_key(spec.cluster))
    hub.queue.add_after(key, max(hub.poll_interval, hub.fallback) if watched else (
        hub.poll_interval))  # fmt: skip


async def _one_runs(hub: Hub, run: _Run, spec: CopySpec, cleanups: list[Obj]) -> None:
    """The one copy is ready (and any other removed): the application RUNS there."""
    app, key, target = run.app, cache_key(run.app), spec.cluster
    status, report = app.status, run.reports[ref_key(spec.cluster)]
    if status.deploy_state is not ApplicationState.RUNNING or status.running_on != target:
        reasons.deployed(hub.events, app, target.name, run.health)
    await hub.write(app, {
        "deploy_state": ApplicationState.RUNNING,
        "running_on": target,
        "last_applied_manifest": report.last_applied_manifest,
        "mangled_observer_schema": spec.observer_schema,
        "last_observed_manifest": report.last_observed_manifest,
        "container_health": run.health,
        "deploy_reason": None,
        "pending_cleanups": cleanups,
        "retries": None,
        "copies": [],
        "shutdown_grace_period": None,
    })  # fmt: skip
    hub.failures.pop(key, None)
    # at rest: the timers set on its way (progress, readiness, retries) have nothing left
    hub.queue.add_after(key, hub.resync, replace=not cleanups)


async def _several_written(hub: Hub, run: _Run, before: dict[CacheKey, CopyStatus],
                           cleanups: list[Obj], all_ready: bool) -> None:  # fmt: skip
    """Each copy's status, and the application's: RUNNING when every copy is ready."""
    app, key, status = run.app, cache_key(run.app), run.app.status
    copies = {**before, **run.copies}
    order = [ref_key(p.cluster) for p in status.placements]
    written = [copies[w] for w in order if w in copies]
    written += [c for w, c in copies.items() if w not in order]
    wanted = set(order)
    fields: dict[str, Any] = {
        "copies": written,
        "container_health": run.health,
        "pending_cleanups": cleanups,
    }
    not_ready = [c.cluster.name for c in written
                 if c.state is not ApplicationState.RUNNING or ref_key(c.cluster) not in wanted]
    if all_ready and not not_ready:
        first = status.placements[0].cluster
        if status.deploy_state is not ApplicationState.RUNNING:
            names = ", ".join(p.cluster.name for p in status.placements)
            reasons.deployed(hub.events, app, names, run.health)
        report = run.reports.get(ref_key(first))
        fields.update(
            deploy_state=ApplicationState.RUNNING,
            deploy_reason=None,
            running_on=first,
            last_applied_manifest=hub.desired(app),
            # what runs on the first placement's cluster, as for one copy
            last_observed_manifest=report.last_observed_manifest if report else [],
            retries=None,
            shutdown_grace_period=None,
        )
        await hub.write(app, fields)
        hub.failures.pop(key, None)
        hub.queue.add_after(key, hub.resync)
        return
    fields["deploy_state"] = run.phase  # a placement is not ready yet: not RUNNING
    if run.failures:
        message = f"placements not ready: {'; '.join(run.failures)}"
        fields["deploy_reason"] = Reason(
            code=run.failure_code or ReasonCode.KUBERNETES_ERROR, message=message[:1000]
        )
    else:
        fields["deploy_reason"] = None
    await hub.write(app, fields)
    if run.failures:
        delay = RETRY
    elif hub.watches is not None:  # readiness comes with the watch events
        delay = max(hub.poll_interval, hub.fallback)
    else:
        delay = hub.poll_interval
    hub.queue.add_after(key, delay)


def withdrawn(hub: Hub, app: Application) -> bool:
    """Placed nowhere now, while a copy still runs on a cluster being deleted."""
    if app.status.placements or app.status.scheduled_to is not None:
        return False
    for ref in runs_on(app.status):
        cluster = None if outside(app, ref) else hub.cluster(ref)
        if cluster is not None and cluster.metadata.deleted is not None:
            return True
    return False


async def withdraw(hub: Hub, app: Application) -> None:
    """No placement left (it waits): remove the copies from clusters being deleted; a
    cluster goes only when Shoal left nothing on it."""
    cleanups = list(app.status.pending_cleanups)
    keep: list[CopyStatus] = []
    for ref in runs_on(app.status):
        copy = next((c for c in app.status.copies if c.cluster == ref), None)
        cluster = hub.cluster(ref)
        if cluster is None or cluster.metadata.deleted is None:
            if copy is not None:
                keep.append(copy)
            continue
        left = await remove_from_old(hub, app, ref)
        if left is not None:
            cleanups = merge_cleanup(cleanups, left)
        log.info("application %s/%s: withdrawn from %s, which is being deleted",
                 app.metadata.namespace, app.metadata.name, ref.name)  # fmt: skip
    fields: dict[str, Any] = {"copies": keep, "pending_cleanups": cleanups}
    if not keep:
        fields.update(running_on=None, deploy_state=None)
    await hub.write(app, fields)
