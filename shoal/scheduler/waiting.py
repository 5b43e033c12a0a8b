"""When nothing fits: how long an application waits, how often it is tried again, and the
reason its status gives.

Two rules of retry exist side by side: Shoal's (``spec.retry_limit``,
``spec.retry_delay``, the scheduler's growing back-off) and Krake's
(``spec.backoff_limit`` × ``backoff_delay``, DEGRADED while it waits). Both are chosen and
counted here, apart from the pass that writes them, so that a reader finds the rules of
waiting in one place (docs/scheduler.md, "When nothing fits").
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal.model.base import Reason, ReasonCode, ResourceRef, utcnow
from shoal.model.kubernetes import DEGRADED, PLACEMENT_SHORT, Application, Condition
from shoal.model.scheduler_config import SchedulerConfig

#: The reason Krake's scheduler gives when no cluster fits (its ``NoClusterFound``).
NO_CLUSTER_FOUND = "No matching Kubernetes cluster found"
#: Shortest retry delay under Krake's back-off (``backoff_delay: 0`` would spin).
KRAKE_MIN_DELAY = 0.1


def krake_backoff(app: Application) -> bool:
    """The application waits under Krake's back-off: it sets ``spec.backoff_limit``
    (not -1) and neither of Shoal's ``spec.retry_limit``, ``spec.retry_delay``
    (docs/scheduler.md, "When nothing fits")."""
    spec = app.spec
    return spec.retry_limit is None and spec.retry_delay is None and spec.backoff_limit >= 0


def retry_limit(app: Application, config: SchedulerConfig) -> int:
    """Failed attempts before FAILED (-1: never): ``spec.retry_limit``; else Krake's
    ``spec.backoff_limit`` retries after the first attempt; else the config's."""
    if app.spec.retry_limit is not None:
        return app.spec.retry_limit
    if krake_backoff(app):
        return app.spec.backoff_limit + 1
    return config.retries


def retry_delay(app: Application, config: SchedulerConfig, attempts: int) -> float:
    """Delay after ``attempts`` failed attempts: Krake's ``backoff_delay × backoff``
    under its back-off (the same each time, as Krake); else the scheduler's backoff
    from the application's first delay."""
    if krake_backoff(app):
        return max(float(app.spec.backoff_delay * app.spec.backoff), KRAKE_MIN_DELAY)
    backoff = config.backoff
    if app.spec.retry_delay is not None:
        backoff = backoff.model_copy(update={"initial": app.spec.retry_delay})
    return backoff.delay(attempts)


def waiting_reason(
    app: Application, current: ResourceRef | None, gone: bool, unmatched: bool, summary: str
) -> Reason:
    """Why the application waits: its cluster was deleted (the reason keeps naming it while
    it waits for another), no longer matches its constraints, or nothing fits."""
    status = app.status
    if gone and current is not None:
        return Reason(
            code=ReasonCode.CLUSTER_DELETED,
            message=f"cluster {current.name} was deleted; {summary}",
        )
    if unmatched and current is not None:
        return Reason(
            code=ReasonCode.RESOURCE_NOT_FOUND,
            message=f"cluster {current.name} no longer matches the application's "
            f"constraints; {summary}",
        )
    if (
        current is None
        and status.schedule_reason is not None
        and status.schedule_reason.code is ReasonCode.CLUSTER_DELETED
        and status.last_scheduled_to is not None
    ):
        return Reason(
            code=ReasonCode.CLUSTER_DELETED,
            message=f"cluster {status.last_scheduled_to.name} was deleted; {summary}",
        )
    return Reason(code=ReasonCode.RESOURCE_NOT_FOUND, message=summary)


def failed_reason(app: Application, reason: Reason) -> Reason:
    """The reason of an application out of retries."""
    message = "No cluster available"
    if krake_backoff(app):
        message = f"{NO_CLUSTER_FOUND}: {reason.message}"
    return Reason(code=ReasonCode.NO_SUITABLE_RESOURCE, message=message)


def retry_reason(app: Application, reason: Reason) -> Reason:
    """The reason of an application with retries left: DEGRADED under Krake's back-off."""
    if krake_backoff(app):
        message = f"{NO_CLUSTER_FOUND}: {reason.message}"
        return Reason(code=ReasonCode.NO_SUITABLE_RESOURCE, message=message)
    return reason


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
