"""The RescheduleTask controller (seed 002): stamp the trigger on every target, report results.

A task is worked in three steps, each safe to repeat after a crash:

1. observe: the targets are selected once (references, selectors, clusters)
   and written to ``status.targets`` with the trigger time (the task's
   ``metadata.created``), so a restart sees the same set even after the
   applications moved off the selected clusters;
2. stamp: ``status.reschedule_requested`` of each pending target is moved
   forward to the trigger through the ``reschedule`` subresource (in batches);
   the API never moves it back, so stamping twice asks for one pass;
3. observe results from the application cache: a target is ``Successful``
   when it was scheduled after its request, ``Failed`` when the scheduler's
   forced pass found no cluster, when it is pinned (``constraints.migration:
   false``), gone, or in a state the scheduler no longer handles. API errors
   while stamping are retried, never reported.

The task finishes when every target has a result; ``ttl_seconds_after_finished``
then deletes it. Nothing polls the API: informers feed a work queue.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from shoal.client.informer import Informer
from shoal.client.rest import ApiError, Conflict, NotFound, ShoalClient
from shoal.controllers.base import Controller
from shoal.controllers.queue import WorkQueue
from shoal.model.base import utcnow
from shoal.model.constraints import LabelSelector
from shoal.model.kubernetes import Application, ApplicationState
from shoal.model.scheduling import (
    DEFAULT_NAMESPACE,
    RescheduleTask,
    TargetReason,
    TargetResult,
    TargetStatus,
    TaskPhase,
)
from shoal.scheduler.application import INACTIVE_STATES, AppKey

log = logging.getLogger(__name__)

_STAMP_BATCH = 1000


def _parse(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _spell(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def cluster_key(text: str) -> tuple[str, str]:
    """``ns/name`` or ``name`` (namespace ``default``)."""
    namespace, _, name = text.rpartition("/")
    return (namespace or DEFAULT_NAMESPACE, name)


class Verdict:
    """What to do with one pending target."""

    WAIT = "wait"
    STAMP = "stamp"


class RescheduleTaskController(Controller):
    def __init__(
        self,
        client: ShoalClient,
        *,
        workers: int = 4,
        debounce: float = 0.1,
        resync: float = 30.0,
    ) -> None:
        super().__init__()
        self.client = client
        self.workers = workers
        self.debounce = debounce
        self.resync = resync
        self.queue: WorkQueue[str] = WorkQueue()
        self.apps: Informer[Application] = Informer(
            client, Application, on_change=self._app_event, on_delete=self._app_event
        )
        self.tasks: Informer[RescheduleTask] = Informer(
            client,
            RescheduleTask,
            on_change=lambda task, old: self.queue.add(task.metadata.name),
            on_delete=self._task_deleted,
        )
        # application → tasks with a pending target on it
        self.watchers: dict[AppKey, set[str]] = defaultdict(set)
        # task uid → targets whose stamp was sent and not yet seen in the cache
        self.sent: dict[str, set[AppKey]] = defaultdict(set)
        self.stamps = 0  # stamps sent (tests, metrics)
        self._written: dict[str, float] = {}  # task → monotonic time of its last status write

    # lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        await self.start_informers(self.apps)  # targets are judged from this cache
        await self.start_informers(self.tasks)
        for _ in range(self.workers):
            self.spawn(self.work(self.queue, self.reconcile, self._retry))

    async def stop(self) -> None:
        self.queue.close()
        await super().stop()

    # events ----------------------------------------------------------------------

    def _app_event(self, app: Application, old: Application | None = None) -> None:
        key = (app.metadata.namespace or "", app.metadata.name)
        for name in self.watchers.get(key, ()):
            self.queue.add_after(name, self.debounce)

    def _task_deleted(self, task: RescheduleTask) -> None:
        self._unwatch(task.metadata.name)
        self._written.pop(task.metadata.name, None)
        self.sent.pop(task.metadata.uid or "", None)

    def _unwatch(self, name: str, keep: Iterable[AppKey] = ()) -> None:
        kept = set(keep)
        for key in [k for k, names in self.watchers.items() if name in names and k not in kept]:
            self.watchers[key].discard(name)
            if not self.watchers[key]:
                del self.watchers[key]

    def _retry(self, name: str, error: Exception) -> None:
        if isinstance(error, Conflict):
            self.queue.add(name)  # our cache was stale: the update event brings it back
        else:
            log.exception("reschedule task %s failed; retrying", name)
            self.queue.add_after(name, 1.0)

    # the work ----------------------------------------------------------------------

    async def reconcile(self, name: str) -> None:
        task = self.tasks.get(name)
        if task is None or task.metadata.deleted is not None:
            self._unwatch(name)
            return
        status = task.status
        if status.phase is TaskPhase.Finished:
            self._unwatch(name)
            self.sent.pop(task.metadata.uid or "", None)
            await self._expire(task)
            return
        if not status.targets or status.trigger_time is None:
            await self._observe(task)
            return
        await self._progress(task)

    async def _observe(self, task: RescheduleTask) -> None:
        """Select the targets once and record them with the trigger time."""
        update = task.model_copy(deep=True)
        update.status.trigger_time = task.metadata.created or utcnow()
        update.status.targets = self.select(task)
        update.status.phase = TaskPhase.Running
        _count(update)
        if not update.status.targets:
            update.status.phase = TaskPhase.Finished
            update.status.finish_time = utcnow()
        await self.client.update_status(update)

    def select(self, task: RescheduleTask) -> list[TargetStatus]:
        spec = task.spec
        chosen: dict[AppKey, TargetStatus] = {}
        for ref in spec.target_ref_resource:
            chosen.setdefault(
                (ref.namespace, ref.name),
                TargetStatus(api=ref.api, kind=ref.kind, namespace=ref.namespace, name=ref.name),
            )
        selectors = [
            (policy.namespace, LabelSelector.parse(policy.label_selector))
            for policy in spec.target_ref_policy
        ]
        clusters = {cluster_key(text) for text in spec.target_clusters}
        if selectors or clusters:
            for app in sorted(self.apps.items(), key=_app_key):
                if app.metadata.deleted is not None:
                    continue
                key = _app_key(app)
                where = app.status.scheduled_to
                on = (where.namespace or DEFAULT_NAMESPACE, where.name) if where else None
                if on in clusters or any(
                    ns == key[0] and selector.matches(app.metadata.labels)
                    for ns, selector in selectors
                ):
                    chosen.setdefault(key, TargetStatus(namespace=key[0], name=key[1]))
        return list(chosen.values())

    async def _progress(self, task: RescheduleTask) -> None:
        name = task.metadata.name
        trigger = task.status.trigger_time
        assert trigger is not None
        update = _working_copy(task)
        sent = self.sent[task.metadata.uid or ""]
        changed = False
        stamp: list[TargetStatus] = []
        pending: list[AppKey] = []
        for target in update.status.targets:
            if target.result is not None:
                continue
            key = (target.namespace, target.name)
            verdict = self.judge(target, trigger)
            if verdict == Verdict.STAMP:
                if key not in sent:
                    stamp.append(target)
                pending.append(key)
            elif verdict == Verdict.WAIT:
                sent.discard(key)
                pending.append(key)
            else:
                sent.discard(key)
                changed = True
        for key in pending:
            self.watchers[key].add(name)
        self._unwatch(name, keep=pending)
        if stamp:
            changed |= await self._stamp(stamp, trigger, sent, _acting_for(task))
        if changed:
            _count(update)
            if update.status.pending == 0:
                update.status.phase = TaskPhase.Finished
                update.status.finish_time = utcnow()
            else:
                # Progress of a large task is written at most every ~total/10000 s: each
                # write carries every target (results are recomputed from the cache).
                wait = self._written.get(name, 0.0) + len(update.status.targets) / 10_000
                if wait > time.monotonic():
                    self.queue.add_after(name, wait - time.monotonic())
                    return
            self._written[name] = time.monotonic()
            await self.client.update_status(update)
        elif pending:
            self.queue.add_after(name, self.resync)  # cheap re-check of the cache

    def judge(self, target: TargetStatus, trigger: datetime) -> str | None:
        """Set the target's result when it has one; else what it waits for."""
        if target.api != "kubernetes" or target.kind != "Application":
            return _fail(target, TargetReason.UnsupportedKind, f"cannot reschedule a {target.kind}")
        app = self.apps.get(target.name, target.namespace)
        if app is None:
            return _fail(target, TargetReason.ApplicationNotFound, "no such application")
        status = app.status
        target.cluster = status.scheduled_to.name if status.scheduled_to else None
        if app.metadata.deleted is not None:
            return _fail(target, TargetReason.ApplicationDeleting, "being deleted")
        if not app.spec.constraints.migration and status.scheduled_to is not None:
            return _fail(
                target, TargetReason.MigrationDisabled, "constraints.migration is false: not moved"
            )
        requested = status.reschedule_requested
        if requested is not None and requested >= trigger:
            if status.last_scheduled is not None and status.last_scheduled > requested:
                target.result = TargetResult.Successful
                target.reason = TargetReason.Rescheduled
                target.message = f"scheduled to {target.cluster}"
                return None
            explanation = status.scheduling or {}
            answered = _parse(explanation.get("reschedule_requested"))
            if (
                explanation.get("forced")
                and explanation.get("chosen") is None
                and answered is not None
                and answered >= trigger
            ):
                return _fail(
                    target, TargetReason.NoSuitableCluster, str(explanation.get("summary", ""))
                )
        if status.state is ApplicationState.FAILED:
            message = status.reason.message if status.reason else "FAILED"
            return _fail(target, TargetReason.ApplicationFailed, message)
        if status.state in INACTIVE_STATES:
            return _fail(target, TargetReason.ApplicationDeleting, f"state {status.state.value}")
        if requested is not None and requested >= trigger:
            return Verdict.WAIT
        return Verdict.STAMP

    async def _stamp(
        self,
        targets: list[TargetStatus],
        trigger: datetime,
        sent: set[AppKey],
        headers: dict[str, str] | None = None,
    ) -> bool:
        """Send the requests in batches; True when some target got a result meanwhile.

        ``headers`` impersonate the task's requester: the API refuses (403) each
        application that user may not update, and it is reported Forbidden.
        """
        changed = False
        when = _spell(trigger)
        for start in range(0, len(targets), _STAMP_BATCH):
            chunk = targets[start : start + _STAMP_BATCH]
            body = {
                "items": [
                    {"namespace": t.namespace, "name": t.name, "requested": when} for t in chunk
                ]
            }
            data = await self.client.request(
                "POST", "/scheduling/reschedules", body=body, headers=headers
            )
            transient = False
            for target, result in zip(chunk, data["results"], strict=True):
                code = int(result.get("status", 500))
                if code == 200:
                    sent.add((target.namespace, target.name))
                    self.stamps += 1
                elif code == 404:
                    _fail(target, TargetReason.ApplicationNotFound, "no such application")
                    changed = True
                elif code == 403:
                    _fail(target, TargetReason.Forbidden, str(result.get("detail", "")))
                    changed = True
                elif code == 409 and "deleted" in str(result.get("detail", "")):
                    _fail(target, TargetReason.ApplicationDeleting, "being deleted")
                    changed = True
                else:
                    transient = True
            if transient:
                raise ApiError(503, {"title": "RETRY", "detail": "some stamps must be retried"})
        return changed

    async def _expire(self, task: RescheduleTask) -> None:
        ttl = task.spec.ttl_seconds_after_finished
        if ttl is None:
            return
        finished = task.status.finish_time or utcnow()
        left = ttl - (utcnow() - finished).total_seconds()
        if left > 0:
            self.queue.add_after(task.metadata.name, left)
            return
        try:
            await self.client.delete(RescheduleTask, task.metadata.name)
        except NotFound:
            pass


def _acting_for(task: RescheduleTask) -> dict[str, str] | None:
    """Impersonation headers of the task's requester (set by the API when security is on)."""
    who = task.spec.requested_by
    if who is None:
        return None
    headers = {"Impersonate-User": who.user}
    if who.groups:
        headers["Impersonate-Group"] = ",".join(who.groups)
    return headers


def _fail(target: TargetStatus, reason: TargetReason, message: str) -> str | None:
    """Record a failed result; None, the verdict of a target that has its result."""
    target.result = TargetResult.Failed
    target.reason = reason
    target.message = message
    return None


def _app_key(app: Application) -> AppKey:
    return (app.metadata.namespace or "", app.metadata.name)


def _count(task: RescheduleTask) -> None:
    status = task.status
    status.total = len(status.targets)
    status.successful = sum(t.result is TargetResult.Successful for t in status.targets)
    status.failed = sum(t.result is TargetResult.Failed for t in status.targets)
    status.pending = status.total - status.successful - status.failed


def _working_copy(task: RescheduleTask) -> RescheduleTask:
    """A copy to judge targets on without touching the informer's cached object.

    Targets are flat records: those with a result are final and shared, the
    pending ones are copied shallowly. A deep copy of a 10,000-target task was
    over half of the controller's time.
    """
    status = task.status.model_copy()
    status.targets = [t if t.result is not None else t.model_copy() for t in status.targets]
    copy = task.model_copy()
    copy.status = status
    return copy
