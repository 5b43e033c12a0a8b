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
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from shoal.client.rest import Conflict, NotFound
from shoal.events import Recorder
from shoal.model.base import ResourceRef, utcnow
from shoal.model.kubernetes import INACTIVE_STATES, Application, ApplicationState
from shoal.model.placement import desired_replicas, pod_request
from shoal.model.placement_spec import Placement
from shoal.scheduler import report, spread, triggers
from shoal.scheduler.backends import Backend
from shoal.scheduler.binder import Binder
from shoal.scheduler.framework import Decision
from shoal.scheduler.handler import Handler, Outcome
from shoal.scheduler.requests import (
    alive,
    backend_fits,
    looked_at,
    meets_own_constraints,
    pods_to_hold,
    ref_json,
    ref_key,
    ref_of,
    request_for,
)
from shoal.scheduler.waiting import (
    degraded,
    failed_reason,
    retry_delay,
    retry_limit,
    retry_reason,
    waiting_reason,
)

log = logging.getLogger(__name__)

#: A move held by ``min_migration_interval`` is made this share of the interval later (3 s
#: of 60): a client that polls for the completed move sees it up to a second or two late.
SETTLE_GRACE = 0.05


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
            return triggers.spec_changed_since_attempt(app)
        return True

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
        if running is not None and bound is not None and ref_key(running) != ref_key(bound):
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
        spec_updated = triggers.spec_updated(app)
        forced = triggers.forced(app)
        revision = app.metadata.resource_version

        gone = current is not None and not alive(current_backend)
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
        target = ref_of(chosen)
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
        spec_updated = triggers.spec_updated(app)
        forced = triggers.forced(app)
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
                **self._binding(app, ref_of(first), spec_updated, explanation, None),
                "placements": [
                    {"cluster": ref_json(ref_of(pick.backend)), "replicas": pick.replicas}
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
            "cluster": ref_json(cluster),
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
        current = app.status.scheduled_to
        backend = self._backend(current) if current is not None else None
        gone = current is not None and not alive(backend)
        # The cluster no longer has what the application asks of it (its labels changed):
        # the application waits for one that has, and its copy runs on where it ran.
        unmatched = (
            current is not None
            and backend is not None
            and not gone
            and not meets_own_constraints(request_for(app, self.config), backend)
        )
        if current is not None and not gone and not unmatched and not triggers.spec_updated(app):
            return await self._keep_where_it_runs(app, decision, explanation)
        return await self._wait(app, decision, explanation, gone, unmatched)

    async def _keep_where_it_runs(
        self, app: Application, decision: Decision, explanation: dict[str, Any]
    ) -> Outcome:
        """Running where it is and nothing better exists: keep it; record why, once."""
        status = app.status
        previous = (status.scheduling or {}).get("summary")
        fields: dict[str, Any] = {}
        if previous != decision.summary or triggers.unanswered(app):
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

    async def _wait(
        self,
        app: Application,
        decision: Decision,
        explanation: dict[str, Any],
        gone: bool,
        unmatched: bool,
    ) -> Outcome:
        """Unbound or never placed: count the attempt, then wait for a retry or fail."""
        status = app.status
        current = status.scheduled_to
        attempts = 0 if triggers.spec_changed_since_attempt(app) else status.scheduler_attempts
        attempts += 1
        limit = retry_limit(app, self.config)
        fields: dict[str, Any] = {"scheduling": explanation, "scheduler_attempts": attempts}
        if (gone or unmatched) and status.placements:
            fields["placements"] = []  # the whole placement waits, as one cluster would
        if (gone or unmatched) and current is not None:
            fields.update(scheduled_to=None, last_scheduled_to=current)
        reason = waiting_reason(app, current, gone, unmatched, decision.summary)
        if 0 <= limit <= attempts:
            fields.update(
                scheduler_retries=0, next_retry=None, schedule_reason=failed_reason(app, reason)
            )
            await self._patch(app, fields)
            report.failed(self, app, attempts, decision.summary)
            return Outcome("failed")
        reason = retry_reason(app, reason)
        delay = retry_delay(app, self.config, attempts)
        fields.update(
            scheduler_retries=limit - attempts if limit >= 0 else None,
            next_retry=utcnow() + timedelta(seconds=delay),
            schedule_reason=reason,
        )
        await self._patch(app, fields)
        report.unschedulable(self, app, attempts, limit, delay, reason.message)
        return Outcome("waiting", retry_in=delay)

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
