"""The RescheduleTask controller: stamp the trigger on every target, report results.

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
   while stamping are retried, never reported. Only the targets whose
   application changed are judged again; results wait in memory (``Progress``)
   for a write, and are judged again from the cache after a restart.

The task finishes when every target has a result; ``ttl_seconds_after_finished``
then deletes it. Nothing polls the API: informers feed a work queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from shoal.client.informer import Informer
from shoal.client.rest import Conflict, NotFound, ShoalClient
from shoal.client.wire import item_path
from shoal.controllers.base import Controller
from shoal.events import Recorder, reasons
from shoal.machinery.selectors import LabelSelector
from shoal.machinery.workqueue import WorkQueue
from shoal.model.application_status import placed_on
from shoal.model.base import utcnow
from shoal.model.kubernetes import AppKey
from shoal.model.scheduling import (
    DEFAULT_NAMESPACE,
    RescheduleTask,
    RescheduleTaskStatus,
    TargetStatus,
    TaskPhase,
)
from shoal.reschedule import stamping
from shoal.reschedule.progress import Progress
from shoal.reschedule.stamping import (
    FIRST_STAMPS,
    acting_for,
    freeze_views,
    send_stamps,
)
from shoal.reschedule.verdict import (
    Verdict,
    count_results,
    judge,
    stamped_only,
)
from shoal.reschedule.view import ApplicationView, TaskView

log = logging.getLogger(__name__)

# Progress writes: counts only, at least 2 s apart, when a quarter of the targets got
# results since the last one or 10 s went by; every target at most every 30 s. Even a
# counts-only write costs the API a check of the whole status (a tenth of its CPU during
# a 10,000-target task at 0.5 s apart), and every reader of the task a decode of every
# target: a bounded number of them, not one per second of a slow task.
_COUNTS_EVERY = 2.0
_QUIET = 10.0
_TARGETS_EVERY = 30.0
_COUNTS = ("total", "successful", "failed", "pending")


def cluster_key(text: str) -> tuple[str, str]:
    """``ns/name`` or ``name`` (namespace ``default``)."""
    namespace, _, name = text.rpartition("/")
    return (namespace or DEFAULT_NAMESPACE, name)


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
        # Only the fields targets are judged by: a third of the CPU of decoding whole applications.
        # Followed only while a task is unfinished: with none, no application event reaches
        # this process (every create, binding and status patch of every application).
        self.apps: Informer[ApplicationView] = self._apps_informer()
        self._apps_run: asyncio.Task[None] | None = None
        self.tasks: Informer[TaskView] = Informer(
            client,
            TaskView,
            on_change=lambda task, old: self.queue.add(task.metadata.name),
            on_delete=self._task_deleted,
        )
        # application → tasks with a pending target on it
        self.watchers: dict[AppKey, set[str]] = defaultdict(set)
        # task uid → targets whose stamp was sent and not yet seen in the cache
        self.sent: dict[str, set[AppKey]] = defaultdict(set)
        self.stamps = 0  # stamps sent (tests, metrics)
        self.progress: dict[str, Progress] = {}  # task name → its running state
        self.events = Recorder(client, "reschedule-controller")

    # lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        await self.start_informers(self.tasks)
        self.spawn_workers(self.workers, self.queue, self.reconcile, self._retry)

    async def stop(self) -> None:
        await super().stop()
        await self._drop_apps()
        await self.events.close()

    # the applications, while a task needs them -------------------------------------

    def _apps_informer(self) -> Informer[ApplicationView]:
        return Informer(
            self.client, ApplicationView, on_change=self._app_event, on_delete=self._app_event
        )

    async def _need_apps(self) -> None:
        """Targets are selected and judged from this cache: list and follow them now."""
        if self._apps_run is None:  # no await between the check and the set: no lock needed
            self._apps_run = asyncio.create_task(self.apps.run())
        await self.apps.wait_synced()

    def _unfinished(self) -> bool:
        return any(
            task.status.phase is not TaskPhase.Finished and task.metadata.deleted is None
            for task in self.tasks.items()
        )

    async def _drop_apps(self) -> None:
        """No task left to work: stop following applications and forget them."""
        run, self._apps_run = self._apps_run, None
        if run is None:
            return
        self.apps = self._apps_informer()
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run

    # events ----------------------------------------------------------------------

    def _app_event(self, app: ApplicationView, old: ApplicationView | None = None) -> None:
        if old is not None and stamped_only(app, old):
            return  # its stamp coming back (one event per target) changes no result
        key = (app.metadata.namespace or "", app.metadata.name)
        for name in self.watchers.get(key, ()):
            progress = self.progress.get(name)
            if progress is not None:
                progress.dirty.add(key)
            self.queue.add_after(name, self.debounce)

    def _task_deleted(self, task: TaskView) -> None:
        self.queue.add(task.metadata.name)  # the last one gone: stop following applications
        self._unwatch(task.metadata.name)
        self.progress.pop(task.metadata.name, None)
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
            if not self._unfinished():
                await self._drop_apps()
            return
        status = task.status
        if status.phase is TaskPhase.Finished:
            self._unwatch(name)
            self.sent.pop(task.metadata.uid or "", None)
            self.progress.pop(name, None)
            if not self._unfinished():
                await self._drop_apps()
            await self._expire(task)
            return
        await self._need_apps()
        if status.trigger_time is None:  # written with the targets
            await self._observe(task)
            return
        await self._progress(task)

    async def _observe(self, task: TaskView) -> None:
        """Select the targets once and record them with the trigger time."""
        freeze_views()
        status = RescheduleTaskStatus(
            phase=TaskPhase.Running,
            trigger_time=task.metadata.created or utcnow(),
            targets=self.select(task),
        )
        count_results(status)
        if not status.targets:
            status.phase = TaskPhase.Finished
            status.finish_time = utcnow()
            await self._write(task, None, status, None)
            return
        # Stamping starts from these targets as soon as the write comes back: neither a read
        # of them nor a wait for the informer's copy of the task (every target, decoded).
        progress = Progress.of(task.metadata.uid or "", status.targets)
        await self._write(task, progress, status, None)
        self.progress[task.metadata.name] = progress
        counts = {key: getattr(status, key) for key in _COUNTS}
        written = task.model_copy(
            update={
                "metadata": task.metadata.model_copy(update={"resource_version": progress.written}),
                "status": task.status.model_copy(
                    update={"phase": status.phase, "trigger_time": status.trigger_time, **counts}
                ),
            }
        )
        await self._progress(written)

    def select(self, task: TaskView) -> list[TargetStatus]:
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
                on = {(r.namespace or DEFAULT_NAMESPACE, r.name) for r in placed_on(app.status)}
                if key not in chosen and (
                    bool(on & clusters)
                    or any(
                        ns == key[0] and selector.matches(app.metadata.labels)
                        for ns, selector in selectors
                    )
                ):
                    chosen[key] = TargetStatus(namespace=key[0], name=key[1])
        return list(chosen.values())

    async def _progress(self, task: TaskView) -> None:
        name = task.metadata.name
        trigger = task.status.trigger_time
        assert trigger is not None
        uid = task.metadata.uid or ""
        progress = self.progress.get(name)
        if progress is None or progress.uid != uid:
            stored = await self.client.get(RescheduleTask, name)  # with its targets, once
            if stored.metadata.uid != task.metadata.uid:
                return  # replaced meanwhile: the new task's events bring it back
            progress = self.progress[name] = Progress.of(uid, stored.status.targets)
        full = time.monotonic() >= progress.next_full
        if full:
            keys = [key for key in progress.index if key in progress.pending]
        else:
            keys = [key for key in progress.dirty if key in progress.pending]
        progress.dirty = set()
        if full:
            # Watched before any await: a target's application may change while its stamp
            # is sent (the scheduler answers stamps, a restarted controller's among them),
            # and an event for an unwatched target is dropped, leaving the task to wait for
            # the next full pass, ``resync`` later.
            for key in progress.pending:
                self.watchers[key].add(name)
            self._unwatch(name, keep=progress.pending)
        sent = self.sent[uid]
        # A first few are stamped before the rest is judged: the scheduler starts on them.
        head = keys[:FIRST_STAMPS] if full else []
        stamp = self._judge(progress, head, trigger, sent, name)
        await self._send(task, progress, stamp, trigger, sent, FIRST_STAMPS)
        rest = self._judge(progress, keys[len(head) :], trigger, sent, name)
        if full:
            progress.next_full = time.monotonic() + self.resync
        await self._send(
            task, progress, rest, trigger, sent, stamping.STAMP_BATCH if stamp else FIRST_STAMPS
        )
        stamp += rest
        if stamp:
            asked = sum(key in sent for key, _ in stamp)
            reasons.reschedule_requested(self.events, task, asked, len(stamp))
        await self._report(task, progress)

    def _judge(
        self,
        progress: Progress,
        keys: list[AppKey],
        trigger: datetime,
        sent: set[AppKey],
        name: str,
    ) -> list[tuple[AppKey, TargetStatus]]:
        """Judge these pending targets: settle those with a result; those to stamp."""
        stamp: list[tuple[AppKey, TargetStatus]] = []
        for key in keys:
            judged = progress.targets[progress.index[key]]  # ours alone: no cache holds targets
            verdict = judge(self.apps, judged, trigger)
            if verdict == Verdict.STAMP:
                if key not in sent:
                    stamp.append((key, judged))
            elif verdict == Verdict.WAIT:
                sent.discard(key)
            else:
                sent.discard(key)
                progress.settle(key, judged)
                self._unwatch_one(key, name)
        return stamp

    async def _send(
        self,
        task: TaskView,
        progress: Progress,
        stamp: list[tuple[AppKey, TargetStatus]],
        trigger: datetime,
        sent: set[AppKey],
        first: int,
    ) -> None:
        """Stamp these targets (the first batch ``first`` long); settle those refused."""
        if not stamp:
            return
        name = task.metadata.name
        targets = [target for _, target in stamp]
        try:
            before = len(sent)
            try:
                await send_stamps(
                    self.client, targets, trigger, sent, name, acting_for(task), first
                )
            finally:
                self.stamps += len(sent) - before
        except Exception:
            progress.next_full = 0.0  # judge (and stamp) every pending target again
            raise
        finally:
            for key, target in stamp:
                if target.result is not None:  # refused: reported
                    progress.settle(key, target)
                    self._unwatch_one(key, name)

    async def _report(self, task: TaskView, progress: Progress) -> None:
        """Write progress when the counts moved, as the rules at the top of the module say.

        Results not yet written are kept in ``progress`` (and can be judged again
        from the cache after a restart), so a progress write needs only counts.
        """
        name = task.metadata.name
        if (task.metadata.resource_version or 0) < progress.written:
            return  # the informer has not seen our last write yet: its event comes back here
        counts = progress.counts()
        if counts == {key: getattr(task.status, key) for key in _COUNTS}:
            if progress.pending:
                self.queue.add_after(name, self.resync)  # cheap re-check of the cache
            return
        now = time.monotonic()
        unwritten = task.status.pending - counts["pending"]
        step = max(1, counts["total"] // 4)
        every = _COUNTS_EVERY if unwritten >= step else _QUIET

        def status(targets: list[TargetStatus]) -> RescheduleTaskStatus:
            """Built only to be written: it checks each of ``targets`` again."""
            return RescheduleTaskStatus(
                phase=task.status.phase,
                trigger_time=task.status.trigger_time,
                targets=targets,
                finish_time=task.status.finish_time,
                **counts,
            )

        if not progress.pending:
            finished = status(progress.targets)
            finished.phase = TaskPhase.Finished
            finished.finish_time = utcnow()
            await self._write(task, progress, finished, None)
        elif now - progress.stored >= _TARGETS_EVERY:
            await self._write(task, progress, status(progress.targets), None)
            progress.stored = now
        elif now - progress.counted >= every:
            await self._write(task, progress, status([]), set(_COUNTS))
        else:
            self.queue.add_after(name, progress.counted + every - now)
            return
        progress.counted = now

    async def _write(
        self,
        task: TaskView,
        progress: Progress | None,
        status: RescheduleTaskStatus,
        fields: set[str] | None,
    ) -> None:
        """Patch the task's status (``fields`` only, or all) under compare-and-swap.

        The answer, a task with every target, is not validated: the informer
        brings it. The swap made this write the task's next revision, so any
        revision above the one it replaced already holds it.
        """
        revision = task.metadata.resource_version or 0
        body = status.model_dump(mode="json", include=fields, exclude={"targets"})
        if fields is None:
            # Targets without their defaults (a third of the bytes): the API, which parses,
            # copies and validates every one, spent 145 ms on 10,000 of them, now 95.
            lean = status.model_dump(mode="json", include={"targets"}, exclude_defaults=True)
            body["targets"] = lean.get("targets", [])
        await self.client.request(
            "PATCH",
            item_path(RescheduleTask, task.metadata.name) + "/status",
            body={"metadata": {"resource_version": revision}, "status": body},
        )
        if progress is not None:
            progress.written = revision + 1

    def _unwatch_one(self, key: AppKey, name: str) -> None:
        names = self.watchers.get(key)
        if names is not None:
            names.discard(name)
            if not names:
                del self.watchers[key]

    async def _expire(self, task: TaskView) -> None:
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


def _app_key(app: ApplicationView) -> AppKey:
    return (app.metadata.namespace or "", app.metadata.name)


