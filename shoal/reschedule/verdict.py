"""How the RescheduleTask controller judges one target: its result, or what it waits for.

Read from the application cache alone (no API call), so that the controller can judge
again every target whose application changed, and every pending one after a restart.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shoal.client.informer import Informer
from shoal.model.kubernetes import INACTIVE_STATES, ApplicationState
from shoal.model.scheduling import RescheduleTaskStatus, TargetReason, TargetResult, TargetStatus
from shoal.reschedule.view import ApplicationView


class Verdict:
    """What to do with one pending target."""

    WAIT = "wait"
    STAMP = "stamp"


def judge(apps: Informer[ApplicationView], target: TargetStatus, trigger: datetime) -> str | None:
    """Set the target's result when it has one; else what it waits for."""
    if target.api != "kubernetes" or target.kind != "Application":
        return fail(target, TargetReason.UnsupportedKind, f"cannot reschedule a {target.kind}")
    app = apps.get(target.name, target.namespace)
    if app is None:
        return fail(target, TargetReason.ApplicationNotFound, "no such application")
    status = app.status
    target.cluster = status.scheduled_to.name if status.scheduled_to else None
    if app.metadata.deleted is not None:
        return fail(target, TargetReason.ApplicationDeleting, "being deleted")
    if not app.spec.constraints.migration and status.scheduled_to is not None:
        return fail(
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
        answered = parse_time(explanation.get("reschedule_requested"))
        if (
            explanation.get("forced")
            and explanation.get("chosen") is None
            and answered is not None
            and answered >= trigger
        ):
            return fail(target, TargetReason.NoSuitableCluster, str(explanation.get("summary", "")))
    if status.state is ApplicationState.FAILED:
        message = status.reason.message if status.reason else "FAILED"
        return fail(target, TargetReason.ApplicationFailed, message)
    if status.state in INACTIVE_STATES:
        return fail(target, TargetReason.ApplicationDeleting, f"state {status.state.value}")
    if requested is not None and requested >= trigger:
        return Verdict.WAIT
    return Verdict.STAMP


def fail(target: TargetStatus, reason: TargetReason, message: str) -> str | None:
    """Record a failed result; None, the verdict of a target that has its result."""
    target.result = TargetResult.Failed
    target.reason = reason
    target.message = message
    return None


def stamped_only(app: ApplicationView, old: ApplicationView) -> bool:
    """Nothing a target is judged by changed but ``reschedule_requested`` (a resync judges
    every pending target anyway)."""
    new, was = app.status, old.status
    return (
        new.last_scheduled == was.last_scheduled
        and new.state is was.state
        and new.reason == was.reason
        and new.scheduled_to == was.scheduled_to
        and new.scheduling == was.scheduling
        and app.metadata.deleted == old.metadata.deleted
        and app.spec.constraints.migration == old.spec.constraints.migration
    )


def count_results(status: RescheduleTaskStatus) -> None:
    status.total = len(status.targets)
    status.successful = sum(t.result is TargetResult.Successful for t in status.targets)
    status.failed = sum(t.result is TargetResult.Failed for t in status.targets)
    status.pending = status.total - status.successful - status.failed


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def spell(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
