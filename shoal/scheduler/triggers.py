"""When an application is due a pass, read from its own fields: its spec changed since the
scheduler last handed it on, a reschedule was asked for, or it settled where it is bound.

The scheduler's handler and its event handlers ask these questions of the same fields;
they are answered here once.
"""

from __future__ import annotations

from datetime import datetime

from shoal.model.kubernetes import Application, ApplicationState


def after(a: datetime | None, b: datetime | None) -> bool:
    """a is later than b (a missing b counts as long ago)."""
    return a is not None and (b is None or a > b)


def spec_updated(app: Application) -> bool:
    """The spec changed after the scheduler last handed it to the kube controller."""
    return after(app.metadata.modified, app.status.kube_controller_triggered) or (
        app.status.kube_controller_triggered is None
    )


def spec_changed_since_attempt(app: Application) -> bool:
    """The spec changed since the scheduler's last recorded attempt."""
    seen = (app.status.scheduling or {}).get("spec_modified")
    modified = app.metadata.modified.isoformat() if app.metadata.modified else None
    return seen is not None and modified is not None and modified > seen


def forced(app: Application) -> bool:
    """A reschedule was asked for after the last pass."""
    return after(app.status.reschedule_requested, app.status.last_scheduled)


def settled(app: Application) -> bool:
    """RUNNING on the cluster it is bound to (one cluster)."""
    status = app.status
    return (
        status.state is ApplicationState.RUNNING
        and status.running_on is not None
        and status.scheduled_to is not None
        and (status.running_on.namespace, status.running_on.name)
        == (status.scheduled_to.namespace, status.scheduled_to.name)
    )


def unanswered(app: Application) -> bool:
    """A reschedule request that no written explanation answers yet."""
    if not forced(app) or app.status.reschedule_requested is None:
        return False
    answered = (app.status.scheduling or {}).get("reschedule_requested")
    return answered != app.status.reschedule_requested.isoformat()
