"""Application → cluster placement, with retries that back off, and a delay when nothing fits.

What triggers a scheduling pass, and what it may write:

- a new application, or one whose spec changed (``modified`` later than
  ``kube_controller_triggered``): scheduled at once and bound with
  ``triggered`` so the kube controller acts only after the scheduler saw the
  spec, even when the cluster stays the same;
- every ``reschedule_after`` seconds: re-evaluated, bound elsewhere only when
  another cluster now wins (stickiness included); nothing is written otherwise;
- its cluster deleted or no longer ONLINE, metric values changed, a
  reschedule request (``status.reschedule_requested`` later than
  ``last_scheduled``): evaluated at once;
- nothing fits: PENDING with RESOURCE_NOT_FOUND and the explanation,
  ``scheduler_retries`` counting down with a growing delay, FAILED
  ("No cluster available") when none are left; a cluster event that could
  help wakes it at once. Under Krake's back-off (``spec.backoff_limit`` set,
  ``spec.retry_limit`` and ``spec.retry_delay`` not): DEGRADED with
  NO_SUITABLE_RESOURCE, tried again every ``backoff_delay × backoff`` seconds,
  FAILED after ``backoff_limit`` retries, as Krake's scheduler;
- a better cluster for an application that runs where it is bound: it moves
  at most once per ``min_migration_interval``, counted from when it settled
  there (``migration_wait``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shoal.client.rest import Conflict, NotFound, ShoalClient
from shoal.events import Recorder
from shoal.machinery.selectors import LabelConstraint, MetricConstraint
from shoal.model.application_status import inputs_of
from shoal.model.application_status import state_for as state_for
from shoal.model.base import Reason, ReasonCode, ResourceRef, utcnow
from shoal.model.kubernetes import (
    DEGRADED,
    INACTIVE_STATES,
    PLACEMENT_SHORT,
    Application,
    ApplicationState,
    Cluster,
    ClusterState,
    Condition,
)
from shoal.model.placement import Placement, desired_replicas, pod_request
from shoal.model.scheduler_config import SchedulerConfig
from shoal.scheduler import report, spread
from shoal.scheduler.backends import Backend, Backends, Group
from shoal.scheduler.binder import Binder
from shoal.scheduler.framework import Decision, Framework, Request
from shoal.scheduler.plugins.fit import holds

log = logging.getLogger(__name__)

#: The reason Krake's scheduler gives when no cluster fits (its ``NoClusterFound``).
NO_CLUSTER_FOUND = "No matching Kubernetes cluster found"
#: A move held by ``min_migration_interval`` is made this share of the interval later (3 s
#: of 60): a client that polls for the completed move sees it up to a second or two late.
SETTLE_GRACE = 0.05
#: Shortest retry delay under Krake's back-off (``backoff_delay: 0`` would spin).
KRAKE_MIN_DELAY = 0.1

SCHEDULABLE_CLUSTER_STATES = (ClusterState.ONLINE.value, ClusterState.FAILING_METRICS.value)


def cluster_backend(obj: Any) -> Backend:
    cluster: Cluster = obj
    state = cluster.status.state.value
    return Backend(
        obj=cluster,
        name=cluster.metadata.name,
        namespace=cluster.metadata.namespace,
        labels=dict(cluster.metadata.labels),
        custom_resources=frozenset(cluster.spec.custom_resources)
        | frozenset(cluster.status.custom_resources),
        state=state,
        schedulable=state in SCHEDULABLE_CLUSTER_STATES and cluster.metadata.deleted is None,
        metric_refs=list(cluster.spec.metrics),
        failing_excludes=True,
    )


def request_for(app: Application, config: SchedulerConfig, *, sticky: bool = True) -> Request:
    constraints = app.spec.constraints.cluster
    current = app.status.scheduled_to
    pod, pods, own = pods_to_hold(app)
    return Request(
        namespace=app.metadata.namespace,
        labels=constraints.labels,
        metrics=constraints.metrics,
        custom_resources=constraints.custom_resources,
        current=(current.namespace, current.name) if current else None,
        sticky=sticky,
        stickiness=config.stickiness,
        pod=tuple(sorted(pod.items())),
        pods=pods,
        own=own,
    )


def pods_to_hold(app: Application) -> tuple[dict[str, int], int, dict[str, int]]:
    """What one pod of the application requests, how many a cluster must hold, and its
    pods each cluster runs already.

    One cluster, or a duplicated placement: every replica; a divided one: at least one
    (``shoal.scheduler.spread`` gives each cluster no more than its room). Its pods on a
    cluster count as room for it unless its pods now ask for more than they did.
    """
    manifest = app.spec.manifest
    pod = pod_request(manifest)
    total = desired_replicas(manifest)
    placement = app.spec.placement
    divided = placement is not None and placement.replicas == "divided" and total is not None
    pods = 1 if divided and total else (total or 0)
    status = app.status
    applied = status.last_applied_manifest
    ran = desired_replicas(applied) if applied else total
    if applied and not all(v <= pod_request(applied).get(k, 0) for k, v in pod.items()):
        return pod, pods, {}  # bigger pods: the ones running there make no room for them
    own: dict[str, int] = {}
    for share in status.placements:
        count = share.replicas if share.replicas is not None else ran
        own[share.cluster.name] = count or 0
    if not status.placements and status.scheduled_to is not None:
        own[status.scheduled_to.name] = ran or 0
    return pod, pods, own


def backend_fits(request: Request, backend: Backend) -> bool:
    """Whether one backend passes every filter: used to wake waiting applications."""
    if not backend.schedulable:
        return False
    if not all(LabelConstraint.parse(c).matches(backend.labels) for c in request.labels):
        return False
    if not all(crd in backend.custom_resources for crd in request.custom_resources):
        return False
    if request.pod and request.pods > 0 and not holds(backend, request, request.pods):
        return False
    for text in request.metrics:
        constraint = MetricConstraint.parse(text)
        if not constraint.matches(backend.metric_value(constraint.metric)):
            return False
    return True


def _meets_own_constraints(request: Request, backend: Backend) -> bool:
    """The labels and custom resources the application asks for, on ``backend``: what the
    application requires of a cluster, as opposed to the cluster's state (cordoned,
    OFFLINE, failing metrics) or changing metric values, which leave it where it runs."""
    if not all(LabelConstraint.parse(c).matches(backend.labels) for c in request.labels):
        return False
    return all(crd in backend.custom_resources for crd in request.custom_resources)


def degraded(conditions: Sequence[Condition], short: str | None) -> list[Condition] | None:
    """The conditions with ``Degraded`` set to ``short`` (None: cleared); None when unchanged."""
    others = [c for c in conditions if c.type != DEGRADED]
    now = next((c for c in conditions if c.type == DEGRADED), None)
    if short is None:
        return others if now is not None else None
    if now is not None and now.message == short:
        return None
    since = now.since if now is not None else utcnow()
    condition = Condition(type=DEGRADED, reason=PLACEMENT_SHORT, message=short, since=since)
    return [*others, condition]


def _after(a: datetime | None, b: datetime | None) -> bool:
    """a is later than b (a missing b counts as long ago)."""
    return a is not None and (b is None or a > b)


@dataclass
class Outcome:
    """What a pass did, for the caller to requeue the key."""

    kind: str  # "bound", "kept", "pinned", "waiting", "failed", "skipped", "deferred"
    retry_in: float | None = None
    short: bool = False  # placed on fewer clusters than asked: a cluster event may help


@dataclass(eq=False)
class Handler:
    """What a placement handler works with: the API, the config, its backends and the framework."""

    client: ShoalClient
    config: SchedulerConfig
    backends: Backends
    framework: Framework

    def __post_init__(self) -> None:
        """Subclasses set up their own state here."""


class ApplicationHandler(Handler):
    def __post_init__(self) -> None:
        self.binder = Binder(self.client)
        self.events = Recorder(self.client, "scheduler", enabled=self.config.events)
        self._cache: dict[tuple[Any, ...], Decision] = {}
        self._cache_version = -1
        # told of each cluster with failing metrics that a decision looked at (the
        # scheduler makes it FAILING_METRICS, as Krake's ranking does)
        self.on_failing_metrics: Callable[[Backend], None] | None = None
        # application → when the scheduler saw it start running where it is bound
        self.settled: dict[tuple[str, str], datetime] = {}
        self.bound = 0
        self.conflicts = 0

    # when to act -------------------------------------------------------------

    def wants_pass(self, app: Application) -> bool:
        """Whether the application is in a state the scheduler handles at all."""
        if app.metadata.deleted is not None or app.status.state in INACTIVE_STATES:
            return False
        if app.status.state is ApplicationState.FAILED:
            return self.spec_changed_since_attempt(app)
        return True

    @staticmethod
    def spec_updated(app: Application) -> bool:
        """The spec changed after the scheduler last handed it to the kube controller."""
        return _after(app.metadata.modified, app.status.kube_controller_triggered) or (
            app.status.kube_controller_triggered is None
        )

    @staticmethod
    def spec_changed_since_attempt(app: Application) -> bool:
        seen = (app.status.scheduling or {}).get("spec_modified")
        modified = app.metadata.modified.isoformat() if app.metadata.modified else None
        return seen is not None and modified is not None and modified > seen

    @staticmethod
    def forced(app: Application) -> bool:
        return _after(app.status.reschedule_requested, app.status.last_scheduled)

    def settled_now(self, app: Application) -> None:
        """The application has just started running where it is bound (placed, or moved):
        its next move for a better cluster waits ``min_migration_interval`` from now."""
        self.settled[(app.metadata.namespace or "", app.metadata.name)] = utcnow()

    def forget(self, app: Application) -> None:
        self.settled.pop((app.metadata.namespace or "", app.metadata.name), None)

    def migration_wait(self, app: Application) -> float:
        """Seconds before the application may move for a better cluster (0: now).

        Measured from when it settled where it is: the completed move (or placement),
        as the scheduler saw it, else, when it did not see it (it started since), the
        binding. A move still under way waits for a whole interval. The held move is made
        ``SETTLE_GRACE`` of the interval later, so that whoever saw the move complete a
        moment after it did still counts a whole interval between the two.
        """
        interval = self.config.min_migration_interval
        if interval <= 0:
            return 0.0
        interval *= 1 + SETTLE_GRACE
        status = app.status
        running, bound = status.running_on, status.scheduled_to
        if running is not None and bound is not None and _ref_key(running) != _ref_key(bound):
            return interval  # moving now: the next move waits for this one to settle
        since = self.settled.get((app.metadata.namespace or "", app.metadata.name))
        since = since or status.scheduled
        if since is None:
            return 0.0
        return max(0.0, interval - (utcnow() - since).total_seconds())

    # the pass ------------------------------------------------------------------

    async def schedule(self, app: Application) -> Outcome:
        for _ in range(5):
            try:
                return await self._schedule_once(app)
            except Conflict:
                self.conflicts += 1
                try:
                    app = await self.client.get(
                        Application, app.metadata.name, app.metadata.namespace
                    )
                except NotFound:
                    return Outcome("skipped")
                if not self.wants_pass(app):
                    return Outcome("skipped")
        return Outcome("deferred", retry_in=self.config.backoff.initial)

    def decide(self, app: Application, *, sticky: bool = True, current: bool = True) -> Decision:
        """The framework's decision, shared by applications that ask the same question.

        Applications with the same namespace, constraints and current cluster get
        the same decision until a backend changes (an equivalence cache, as in the
        Kubernetes scheduler); only the random choice among tied clusters is drawn
        again for each.
        """
        request = request_for(app, self.config, sticky=sticky)
        if not current:  # several clusters: inertia is the placement's own (spread.plan)
            request.current = None
        group = self.backends.group(app.metadata.namespace)
        if self._cache_version != self.backends.version:
            self._cache.clear()
            self._cache_version = self.backends.version
        key = (
            request.namespace,
            tuple(request.labels),
            tuple(request.metrics),
            tuple(request.custom_resources),
            request.current,
            request.sticky,
            request.pod,
            request.pods,
            tuple(sorted(request.own.items())),
        )
        cached = self._cache.get(key)
        if cached is None:
            if self.on_failing_metrics is not None:
                for backend in group.failing:
                    self.on_failing_metrics(backend)
            cached = self.framework.decide(request, group)
            cached.revisions = looked_at(group, cached)
            if cached.total == 0:
                cached.namespace = app.metadata.namespace
            if len(self._cache) < 10_000:
                self._cache[key] = cached
            return cached
        if len(cached.ties) > 1 and current:
            return dataclasses.replace(cached, chosen=self.framework.random.choice(cached.ties))
        # several clusters read the ranking, not ``chosen``: the shared decision itself, whose
        # ranking is then sorted once for all (a copy per application would sort it again)
        return cached

    async def _schedule_once(self, app: Application) -> Outcome:
        if app.spec.placement is not None:
            return await self._schedule_placement(app, app.spec.placement)
        cleared = degraded(app.status.conditions, None)
        if cleared is not None:  # no placement any more: nothing runs short
            app = await self.client.patch_status(
                Application,
                app.metadata.name,
                app.metadata.namespace,
                {"conditions": [c.model_dump(mode="json") for c in cleared]},
                resource_version=app.metadata.resource_version,
            )
        status = app.status
        current = status.scheduled_to
        current_backend = (
            self.backends.get(current.namespace, "Cluster", current.name) if current else None
        )
        spec_updated = self.spec_updated(app)
        forced = self.forced(app)
        revision = app.metadata.resource_version

        gone = current is not None and not _alive(current_backend)
        if gone and not app.spec.constraints.migration:
            # Pinned to a cluster that is going away: it may not move; it waits, unbound.
            decision = self.decide(app)
            return await self._no_cluster(app, decision, self._explanation(app, decision, forced))
        if current is not None and not app.spec.constraints.migration and not gone:
            # Pinned: never moved; a spec update is handed on to the kube controller.
            if spec_updated or forced:
                await self._bind(app, current, triggered=spec_updated, explanation=None)
                return Outcome("pinned")
            return Outcome("pinned")

        decision = self.decide(app, sticky=not forced)
        explanation = self._explanation(app, decision, forced)

        if decision.chosen is None:
            return await self._no_cluster(app, decision, explanation)

        chosen = decision.chosen
        target = _ref(chosen)
        if (
            current is not None
            and current.name == chosen.name
            and (current.namespace == chosen.namespace)
        ):
            if spec_updated or forced or status.reason is not None:
                await self._bind(
                    app, target, triggered=spec_updated, explanation=explanation, revision=revision
                )
                report.bound(self, app, decision, forced)
                return Outcome("bound")
            return Outcome("kept")

        if (
            current is not None
            and current_backend is not None
            and not (spec_updated or forced)
            and not current_backend.metrics_failing
            and backend_fits(request_for(app, self.config), current_backend)
        ):  # a move for a better cluster only, not away from one that no longer fits: paced
            wait = self.migration_wait(app)
            if wait > 0:
                return Outcome("deferred", retry_in=wait)

        await self._bind(app, target, triggered=True, explanation=explanation, revision=revision)
        report.bound(self, app, decision, forced)
        return Outcome("bound")

    async def _schedule_placement(self, app: Application, placement: Placement) -> Outcome:
        """An application on several clusters (``shoal.scheduler.spread``)."""
        status = app.status
        spec_updated = self.spec_updated(app)
        forced = self.forced(app)
        current = [(p.cluster.name, p.replicas) for p in status.placements]
        if not current and status.scheduled_to is not None:
            current = [(status.scheduled_to.name, None)]  # placed before spec.placement was set
        decision = self.decide(app, sticky=False, current=False)
        explanation = self._explanation(app, decision, forced)
        total = desired_replicas(app.spec.manifest)
        pinned = not app.spec.constraints.migration and not spec_updated
        plan = spread.plan(
            placement,
            decision.ranked(),
            total,
            pod_request(app.spec.manifest),
            [] if forced and not pinned else current,
            decision.find,
            pods_to_hold(app)[2],
        )
        if pinned and current and {n for n, _ in current} - {n for n, _ in plan.clusters}:
            # migration: false: a share never moves; it waits for its cluster instead
            return Outcome("pinned")
        explanation["placements"] = [pick.explain(placement.spread_by) for pick in plan.picks]
        report.chosen(explanation, plan)
        if not plan.picks or plan.missing:
            if plan.missing and decision.ranked():  # else the filters' reasons say it all
                held = (total or 0) - plan.missing
                decision = dataclasses.replace(
                    decision,
                    chosen=None,
                    summary_note=f"{plan.missing} of {total} replicas fit on no cluster "
                    f"({held} held by {len(plan.picks)} of them)",
                )
                explanation["summary"] = decision.summary
            return await self._no_cluster(app, decision, explanation)
        short = spread.short_of(
            placement, plan, decision.ranked(), decision.backends or (), decision.summary
        )
        if short is not None:
            explanation["short"] = short
        again = self.config.reschedule_after
        if plan.clusters == current and not (spec_updated or forced or status.reason is not None):
            await self._say_short(app, plan, short, app.metadata.resource_version)
            return Outcome("kept", retry_in=again, short=short is not None)
        first = plan.picks[0].backend
        revision = await self.binder.bind(
            {
                **self._binding(app, _ref(first), spec_updated, explanation, None),
                "placements": [
                    {"cluster": _ref_json(_ref(pick.backend)), "replicas": pick.replicas}
                    for pick in plan.picks
                ],
            }
        )
        self.bound += 1
        report.placed(self, app, plan, current, forced)
        await self._say_short(app, plan, short, revision)
        return Outcome("bound", retry_in=again, short=short is not None)

    async def _say_short(
        self, app: Application, plan: spread.Plan, short: str | None, revision: int | None
    ) -> None:
        """Set or clear the ``Degraded`` condition (with its event) when it changed.

        Written after the binding, at the binding's revision. The kube controller
        writes there too: on a conflict the application is read again, and the
        condition written while its placements are still those of ``plan``.
        """
        conditions = degraded(app.status.conditions, short)
        for _ in range(5):
            if conditions is None:
                return
            try:
                await self.client.patch_status(
                    Application,
                    app.metadata.name,
                    app.metadata.namespace,
                    {"conditions": [c.model_dump(mode="json") for c in conditions]},
                    resource_version=revision,
                )
                report.short(self, app, short)
                return
            except Conflict:
                try:
                    fresh = await self.client.get(
                        Application, app.metadata.name, app.metadata.namespace
                    )
                except NotFound:
                    return
                placed = [(p.cluster.name, p.replicas) for p in fresh.status.placements]
                if placed != plan.clusters:
                    return  # placed otherwise since: that pass says it
                conditions = degraded(fresh.status.conditions, short)
                revision = fresh.metadata.resource_version

    def _binding(
        self,
        app: Application,
        cluster: ResourceRef,
        triggered: bool,
        explanation: dict[str, Any] | None,
        revision: int | None,
    ) -> dict[str, Any]:
        """A binding item as JSON (built directly: no model round trip on the hot path)."""
        return {
            "namespace": app.metadata.namespace or "",
            "name": app.metadata.name,
            "cluster": _ref_json(cluster),
            "resource_version": revision if revision is not None else app.metadata.resource_version,
            "triggered": triggered,
            "explanation": explanation,
        }

    async def _bind(
        self,
        app: Application,
        cluster: ResourceRef,
        *,
        triggered: bool,
        explanation: dict[str, Any] | None,
        revision: int | None = None,
    ) -> None:
        await self.binder.bind(self._binding(app, cluster, triggered, explanation, revision))
        self.bound += 1

    def _explanation(self, app: Application, decision: Decision, forced: bool) -> dict[str, Any]:
        data = decision.explanation()
        data["time"] = utcnow().isoformat()
        data["spec_modified"] = app.metadata.modified.isoformat() if app.metadata.modified else None
        data["forced"] = forced
        if forced and app.status.reschedule_requested is not None:
            # Which request this pass answered: a RescheduleTask reads it back.
            data["reschedule_requested"] = app.status.reschedule_requested.isoformat()
        return data

    def _unanswered(self, app: Application) -> bool:
        """A reschedule request that no written explanation answers yet."""
        if not self.forced(app) or app.status.reschedule_requested is None:
            return False
        answered = (app.status.scheduling or {}).get("reschedule_requested")
        return answered != app.status.reschedule_requested.isoformat()

    async def _no_cluster(
        self, app: Application, decision: Decision, explanation: dict[str, Any]
    ) -> Outcome:
        """Nothing fits: keep it where it runs, or wait (PENDING, or DEGRADED under
        Krake's back-off) with a delay.

        Writes only the scheduler's fields, with the application's revision as the
        precondition (the decision was made on it). An application whose cluster is
        deleted is unbound (``scheduled_to`` cleared, ``last_scheduled_to`` kept) with
        reason CLUSTER_DELETED naming it; the retry limit (``retry_limit``) makes it
        FAILED ("No cluster available"), never by default.
        """
        status = app.status
        current = status.scheduled_to
        backend = self._backend(current) if current is not None else None
        gone = current is not None and not _alive(backend)
        # The cluster no longer has what the application asks of it (its labels changed):
        # the application waits for one that has, and its copy runs on where it ran.
        unmatched = (
            current is not None
            and backend is not None
            and not gone
            and not _meets_own_constraints(request_for(app, self.config), backend)
        )
        if current is not None and not gone and not unmatched and not self.spec_updated(app):
            # Running where it is and nothing better exists: keep it; record why, once.
            previous = (status.scheduling or {}).get("summary")
            fields: dict[str, Any] = {}
            if previous != decision.summary or self._unanswered(app):
                fields["scheduling"] = explanation
            short = f"kept where it runs: {decision.summary}" if status.placements else None
            conditions = degraded(status.conditions, short) if short else None
            if conditions is not None:
                fields["conditions"] = [c.model_dump(mode="json") for c in conditions]
            if fields:
                await self._patch(app, fields)
            if conditions is not None:
                report.short(self, app, short)
            return Outcome("waiting", retry_in=self.config.reschedule_after)

        attempts = 0 if self.spec_changed_since_attempt(app) else status.scheduler_attempts
        attempts += 1
        limit = self.retry_limit(app)
        fields = {"scheduling": explanation, "scheduler_attempts": attempts}
        reason = Reason(code=ReasonCode.RESOURCE_NOT_FOUND, message=decision.summary)
        if (gone or unmatched) and status.placements:
            fields["placements"] = []  # the whole placement waits, as one cluster would
        if gone and current is not None:
            fields.update(scheduled_to=None, last_scheduled_to=current)
            reason = Reason(
                code=ReasonCode.CLUSTER_DELETED,
                message=f"cluster {current.name} was deleted; {decision.summary}",
            )
        elif unmatched and current is not None:
            fields.update(scheduled_to=None, last_scheduled_to=current)
            reason = Reason(
                code=ReasonCode.RESOURCE_NOT_FOUND,
                message=f"cluster {current.name} no longer matches the application's "
                f"constraints; {decision.summary}",
            )
        elif (
            current is None
            and status.schedule_reason is not None
            and status.schedule_reason.code is ReasonCode.CLUSTER_DELETED
            and status.last_scheduled_to is not None
        ):  # still waiting for another cluster: the reason keeps naming the deleted one
            reason = Reason(
                code=ReasonCode.CLUSTER_DELETED,
                message=f"cluster {status.last_scheduled_to.name} was deleted; "
                f"{decision.summary}",
            )
        if 0 <= limit <= attempts:
            message = "No cluster available"
            if self.krake_backoff(app):
                message = f"{NO_CLUSTER_FOUND}: {reason.message}"
            fields.update(
                scheduler_retries=0,
                next_retry=None,
                schedule_reason=Reason(code=ReasonCode.NO_SUITABLE_RESOURCE, message=message),
            )
            await self._patch(app, fields)
            report.failed(self, app, attempts, decision.summary)
            return Outcome("failed")
        if self.krake_backoff(app):  # DEGRADED while retries are left, as Krake
            message = f"{NO_CLUSTER_FOUND}: {reason.message}"
            reason = Reason(code=ReasonCode.NO_SUITABLE_RESOURCE, message=message)
        delay = self.retry_delay(app, attempts)
        fields.update(
            scheduler_retries=limit - attempts if limit >= 0 else None,
            next_retry=utcnow() + timedelta(seconds=delay),
            schedule_reason=reason,
        )
        await self._patch(app, fields)
        report.unschedulable(self, app, attempts, limit, delay, reason.message)
        return Outcome("waiting", retry_in=delay)

    @staticmethod
    def krake_backoff(app: Application) -> bool:
        """The application waits under Krake's back-off: it sets ``spec.backoff_limit``
        (not -1) and neither of Shoal's ``spec.retry_limit``, ``spec.retry_delay``
        (docs/scheduler.md, "When nothing fits")."""
        spec = app.spec
        return spec.retry_limit is None and spec.retry_delay is None and spec.backoff_limit >= 0

    def retry_limit(self, app: Application) -> int:
        """Failed attempts before FAILED (-1: never): ``spec.retry_limit``; else Krake's
        ``spec.backoff_limit`` retries after the first attempt; else the config's."""
        if app.spec.retry_limit is not None:
            return app.spec.retry_limit
        if self.krake_backoff(app):
            return app.spec.backoff_limit + 1
        return self.config.retries

    def retry_delay(self, app: Application, attempts: int) -> float:
        """Delay after ``attempts`` failed attempts: Krake's ``backoff_delay × backoff``
        under its back-off (the same each time, as Krake); else the scheduler's backoff
        from the application's first delay."""
        if self.krake_backoff(app):
            return max(float(app.spec.backoff_delay * app.spec.backoff), KRAKE_MIN_DELAY)
        backoff = self.config.backoff
        if app.spec.retry_delay is not None:
            backoff = backoff.model_copy(update={"initial": app.spec.retry_delay})
        return backoff.delay(attempts)

    def _backend(self, ref: ResourceRef) -> Backend | None:
        return self.backends.get(ref.namespace, "Cluster", ref.name)

    async def _patch(self, app: Application, fields: dict[str, Any]) -> None:
        """The scheduler's own status fields, at the revision the decision was made on."""
        await self.client.patch_status(
            Application,
            app.metadata.name,
            app.metadata.namespace,
            fields,
            resource_version=app.metadata.resource_version,
        )


#: Up to this many clusters in a namespace, an explanation records every one's revision.
EXPLAIN_ALL_REVISIONS = 100


def looked_at(group: Group, decision: Decision) -> dict[str, str]:
    """Inputs of the clusters a decision looked at, to tell later whether it is stale.

    Every cluster of a small namespace; in a large one, those the explanation names.
    """
    backends = group.backends
    if len(backends) > EXPLAIN_ALL_REVISIONS:
        named = {str(r["cluster"]) for r in decision.ranking}
        named.update(n for r in decision.rejections for n in r.names)
        if decision.chosen is not None:
            named.add(decision.chosen.name)
        backends = [b for b in backends if b.name in named]
    return {b.name: inputs_of(b.obj) for b in backends if isinstance(b.obj, Cluster)}


def _ref(backend: Backend) -> ResourceRef:
    return ResourceRef(
        api="kubernetes", kind="Cluster", namespace=backend.namespace, name=backend.name
    )


def _ref_json(ref: ResourceRef) -> dict[str, Any]:
    """A reference as a binding item carries it (built directly: no model dump)."""
    return {"api": ref.api, "kind": ref.kind, "namespace": ref.namespace, "name": ref.name}


def _ref_key(ref: ResourceRef) -> tuple[str | None, str]:
    return (ref.namespace, ref.name)


def settled(app: Application) -> bool:
    """RUNNING on the cluster it is bound to (one cluster)."""
    status = app.status
    return (
        status.state is ApplicationState.RUNNING
        and status.running_on is not None
        and status.scheduled_to is not None
        and _ref_key(status.running_on) == _ref_key(status.scheduled_to)
    )


def _alive(backend: Backend | None) -> bool:
    """The cluster exists and is not being deleted."""
    return backend is not None and backend.obj.metadata.deleted is None
