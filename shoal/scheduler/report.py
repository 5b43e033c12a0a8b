"""What a scheduling pass reports: its events and its Prometheus metrics.

The placement code calls one function per outcome with what it holds; the
numbers (scores, clusters available, retry k of n, how long since the spec
changed) are gathered here, so the hot path carries one line per report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shoal.client.informer import Informer
from shoal.events import Recorder, reasons
from shoal.machinery.workqueue import WorkQueue
from shoal.model.base import utcnow
from shoal.model.kubernetes import Application
from shoal.scheduler import stats
from shoal.scheduler.backends import Backends
from shoal.scheduler.framework import Decision
from shoal.scheduler.spread import Plan


class ApplicationHandler(Protocol):
    """What a report reads of the placement handler (``scheduler.application``), named here
    so that the handler imports its reports and not the other way round."""

    backends: Backends
    events: Recorder


class Scheduler(Protocol):
    """What ``watch_state`` reads of the scheduler (``scheduler.scheduler``)."""

    queue: WorkQueue[Any]
    waiting: set[Any]
    app_informer: Informer[Application]


def bound(handler: ApplicationHandler, app: Application, decision: Decision, forced: bool) -> None:
    """``app`` (as it was before the pass) was just bound to ``decision.chosen``."""
    assert decision.chosen is not None
    current = app.status.scheduled_to
    if current is not None and current.name == decision.chosen.name and not forced:
        return  # bound again where it is (its spec changed, a reason cleared): nothing to tell
    backend = handler.backends.get(current.namespace, "Cluster", current.name) if current else None
    state = None if backend is None else ("ONLINE" if backend.schedulable else backend.state)
    moved = reasons.placed(
        handler.events,
        app,
        decision,
        decision.chosen.name,
        current=current,
        current_state=state,
        forced=forced,
    )
    if moved:
        cause = "forced" if forced else ("score" if state == "ONLINE" else "cluster")
        stats.MIGRATIONS.labels(cause).inc()
    if current is None and app.metadata.modified is not None:
        stats.E2E_SECONDS.observe((utcnow() - app.metadata.modified).total_seconds())


def chosen(explanation: dict[str, Any], plan: Plan) -> None:
    """Name in ``explanation`` the clusters ``plan`` chose, not the framework's best score.

    With fallback groups, a cap on clusters or ``spread_by``, the best-scoring
    cluster may run nothing: ``chosen`` is the first pick (the application's
    ``scheduled_to``), ``chosen_clusters`` every pick in order; a plan that leaves
    replicas unplaced chose nothing.
    """
    if not plan.picks or plan.missing:
        explanation.update(chosen=None, score=None, chosen_clusters=[])
        return
    first = plan.picks[0]
    explanation.update(
        chosen=first.backend.name,
        score=first.score,
        chosen_clusters=[pick.backend.name for pick in plan.picks],
    )


def placed(
    handler: ApplicationHandler,
    app: Application,
    plan: Plan,
    before: Sequence[tuple[str, int | None]],
    forced: bool,
) -> None:
    """``app`` (as it was before the pass) was just bound to the clusters of ``plan``."""
    after = plan.clusters
    if after == list(before):
        return  # bound again as it was (its spec changed, a reason cleared)
    lost = [name for name, _ in before if name not in {n for n, _ in after}]
    reasons.shares(handler.events, app, after, before, lost, forced=forced)
    if lost:
        stats.MIGRATIONS.labels("forced" if forced else "cluster").inc()
    if not before and app.metadata.modified is not None:
        stats.E2E_SECONDS.observe((utcnow() - app.metadata.modified).total_seconds())


def short(handler: ApplicationHandler, app: Application, message: str | None) -> None:
    """A placement runs short of what it asked (``PlacementShort``, a Warning), or no
    longer does (``PlacementComplete``)."""
    if message is not None:
        handler.events.emit(app, "PlacementShort", message, type="Warning", key="short")
    else:
        handler.events.emit(app, "PlacementComplete", "Placed on every cluster asked for")


def unschedulable(
    handler: ApplicationHandler,
    app: Application,
    attempt: int,
    limit: int,
    delay: float,
    summary: str,
) -> None:
    """Attempt ``attempt`` of ``limit`` (-1: no limit) found no cluster; next in ``delay`` s."""
    reasons.unschedulable(handler.events, app, attempt, limit, delay, summary)


def failed(handler: ApplicationHandler, app: Application, attempts: int, summary: str) -> None:
    reasons.failed(handler.events, app, attempts, summary)


def watch_state(scheduler: Scheduler) -> None:
    """Queue sizes and applications per cluster and state, read at each scrape."""

    def queues() -> dict[str, int]:
        deadline = scheduler.queue.deadline
        backoff = sum(1 for key in list(scheduler.waiting) if deadline(key) is not None)
        return {
            "ready": len(scheduler.queue),
            "backoff": backoff,
            "unschedulable": len(scheduler.waiting) - backoff,
        }

    def placements() -> list[tuple[str, str, str]]:
        rows = []
        for app in scheduler.app_informer.items():
            target: Any = app.status.scheduled_to
            cluster = target.name if target is not None else ""
            rows.append((app.metadata.namespace or "", cluster, app.status.state.value))
        return rows

    stats.STATE.watch(scheduler, queues, placements)
