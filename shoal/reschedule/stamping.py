"""How the RescheduleTask controller asks for passes: the reschedule requests it sends in
batches, as the task's requester, and what each answer means for its target.

Apart from the controller's loop so that the rules of one request (who it acts for,
which answers are results and which are retried) read in one place.
"""

from __future__ import annotations

import gc
from datetime import datetime

from shoal.client.rest import ApiError, ShoalClient
from shoal.model.kubernetes import AppKey
from shoal.model.scheduling import TargetReason, TargetStatus
from shoal.reschedule.verdict import fail, spell
from shoal.reschedule.view import TaskView

STAMP_BATCH = 1000
# The first batch is small: the scheduler starts on it while the API commits the next.
FIRST_STAMPS = 100


async def send_stamps(
    client: ShoalClient,
    targets: list[TargetStatus],
    trigger: datetime,
    sent: set[AppKey],
    task: str,
    headers: dict[str, str] | None = None,
    first: int = FIRST_STAMPS,
) -> bool:
    """Send the requests in batches; True when some target got a result meanwhile.

    ``headers`` impersonate the task's requester: the API refuses (403) each
    application that user may not update, and it is reported Forbidden. The
    batch names the ``task``: the API writes each stamped application's
    RescheduleRequested event in the stamp's commit.
    """
    changed = False
    when = spell(trigger)
    start, size = 0, first
    while start < len(targets):
        chunk = targets[start : start + size]
        freeze_views()  # the views the last batch's stamps and bindings brought
        start, size = start + size, STAMP_BATCH
        body = {
            "task": task,
            "items": [{"namespace": t.namespace, "name": t.name, "requested": when} for t in chunk],
        }
        data = await client.request("POST", "/scheduling/reschedules", body=body, headers=headers)
        transient = False
        for target, result in zip(chunk, data["results"], strict=True):
            code = int(result.get("status", 500))
            if code == 200:
                sent.add((target.namespace, target.name))
            elif code == 404:
                fail(target, TargetReason.ApplicationNotFound, "no such application")
                changed = True
            elif code == 403:
                fail(target, TargetReason.Forbidden, str(result.get("detail", "")))
                changed = True
            elif code == 409 and "deleted" in str(result.get("detail", "")):
                fail(target, TargetReason.ApplicationDeleting, "being deleted")
                changed = True
            else:
                transient = True
        if transient:
            raise ApiError(503, {"title": "RETRY", "detail": "some stamps must be retried"})
    return changed


def acting_for(task: TaskView) -> dict[str, str] | None:
    """Impersonation headers of the task's requester (set by the API when security is on)."""
    who = task.spec.requested_by
    if who is None:
        return None
    headers = {"Impersonate-User": who.user}
    if who.groups:
        headers["Impersonate-Group"] = ",".join(who.groups)
    return headers


def freeze_views() -> None:
    """Take the application views decoded so far out of the collector's reach.

    The informer replaces a view on every event, which frees as many objects as
    it makes: the collector's count hardly moves while its young generation fills
    with every view since its last pass, which then walks them all at once (0.17 s
    after a failover of 10,000, inside target selection; as much again inside the
    stamping). The views are long-lived and hold no cycles: frozen, they are never
    walked, and freed as usual when replaced. Called when a task starts and before
    each stamp batch, a bounded number of times per task.
    """
    gc.freeze()
