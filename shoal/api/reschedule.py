"""Reschedule requests: the ``reschedule`` subresource of applications and its batch form.

``PUT /kubernetes/namespaces/{ns}/applications/{name}/reschedule`` with
``{"requested": "<rfc3339>"}`` moves ``status.reschedule_requested`` forward
and never back, so a task controller may repeat it after a crash at no cost.
When the application was scheduled at or after ``requested`` (a routine pass
between the task's creation and this call), the request is stamped with the
server's current time instead, so the scheduler still makes a forced pass:
the trigger is always later than the last scheduling it must override.

A batch that names its RescheduleTask (``task``) also writes each stamped
application's ``RescheduleRequested`` event in the same commit: the event
exists exactly when the stamp does, and costs no request or validation of its
own (10,000 targets meant 10,000 events through ``POST /core/events``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from fastapi import APIRouter, Body, Path
from starlette.responses import Response

from shoal.api.batch import add_batch_route, each_item
from shoal.api.codec import rfc3339
from shoal.api.event_items import Involved, Item, Meta
from shoal.api.events import BatchEvent, new_uids, record
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.events.recorder import name_of
from shoal.machinery.names import MAX_OBJECT_NAME, OBJECT_NAME
from shoal.machinery.problems import ProblemError
from shoal.model.base import utcnow
from shoal.model.events import DEFAULT_TTL
from shoal.model.kubernetes import Application
from shoal.model.scheduling import (
    RescheduleBatch,
    RescheduleItem,
    RescheduleRequest,
    RescheduleTask,
)

_NAME = OBJECT_NAME.pattern
REASON = "RescheduleRequested"
COMPONENT = "reschedule-controller"  # the events read as the task controller's own


def _parse(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def request_reschedule(
    resources: Resources,
    name: str,
    namespace: str,
    requested: datetime,
    stamped: Callable[[dict[str, Any]], None] | None = None,
) -> bytes:
    """Stamp a reschedule request on an application (idempotent; only moves forward).

    ``stamped`` is called with the application when this call moved the stamp.
    """
    if requested.tzinfo is None:
        requested = requested.replace(tzinfo=UTC)

    def stamp(data: dict[str, Any]) -> bool:
        if data["metadata"].get("deleted") is not None:
            raise ProblemError(409, f"Application {name!r} is being deleted")
        status = data.setdefault("status", {})
        current = _parse(status.get("reschedule_requested"))
        if current is not None and current >= requested:
            return False  # already asked for
        last = _parse(status.get("last_scheduled"))
        status["reschedule_requested"] = rfc3339(
            requested if last is None or last < requested else utcnow()
        )
        if stamped is not None:
            stamped(data)
        return True

    return await resources.swap_json(Application, name, namespace, None, stamp)


async def _announcer(
    resources: Resources, task: str | None
) -> Callable[[dict[str, Any]], Awaitable[None]] | None:
    """What writes a stamped application's ``RescheduleRequested`` event, as the task
    controller's recorder would name and word it (None: no task named, or no such task)."""
    if task is None:
        return None
    try:
        stored = _head(await resources.get_bytes(RescheduleTask, task, None))
    except ProblemError:
        return None
    requester = (stored.get("spec") or {}).get("requested_by")
    by = f" (for {requester['user']})" if requester else ""
    now = utcnow()
    expires = now + timedelta(seconds=DEFAULT_TTL)
    stamp = rfc3339(now)

    async def announce(app: dict[str, Any]) -> None:
        meta = app["metadata"]
        namespace, name, uid = meta.get("namespace") or "default", meta["name"], meta.get("uid")
        where = (app["status"].get("scheduled_to") or {}).get("name") or "nowhere"
        event = Item(
            api="core",
            kind="Event",
            metadata=Meta(
                name=name_of("Application", name, uid, REASON, task, COMPONENT),
                namespace=namespace,
            ),
            involved_object=Involved(
                api="kubernetes", kind="Application", namespace=namespace, name=name, uid=uid
            ),
            reason=REASON,
            message=f"Reschedule requested by RescheduleTask {task}{by}, now on {where}",
            reporting_component=COMPONENT,
            type="Normal",
            count=1,
            first_timestamp=now,
            last_timestamp=now,
            expires=expires,
        )
        meta_name = event["metadata"]["name"]
        await record(resources, BatchEvent(namespace, meta_name, event, new_uids(1)[0]), stamp)

    return announce


_STATUS = b',"status":{"phase":'


def _head(value: bytes) -> dict[str, Any]:
    """A stored task without its status (every target: a megabyte at 10,000), read once
    per batch. The status comes last, and its key can only be the task's own: quotes
    inside strings are escaped, and no field before it holds such an object."""
    end = value.find(_STATUS)
    data: dict[str, Any] = orjson.loads(value[:end] + b"}" if end > 0 else value)
    return data


def build_router(resources: Resources) -> APIRouter:
    router = APIRouter(route_class=StrictJsonRoute)

    async def reschedule(
        namespace: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME),
        name: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME),
        body: RescheduleRequest = Body(),
    ) -> Response:
        value = await request_reschedule(resources, name, namespace, body.requested)
        return Response(value, media_type="application/json")

    router.add_api_route(
        "/kubernetes/namespaces/{namespace}/applications/{name}/reschedule",
        reschedule,
        methods=["PUT"],
        name="update_applications_reschedule",
        summary="Ask for a forced scheduling pass (moves status.reschedule_requested forward)",
        response_model=Application,
        tags=["kubernetes"],
    )

    async def reschedule_many(body: RescheduleBatch) -> list[dict[str, Any]]:
        announce = await _announcer(resources, body.task)

        async def one(item: RescheduleItem) -> bytes:
            stamped: list[dict[str, Any]] = []
            value = await request_reschedule(
                resources, item.name, item.namespace, item.requested, stamped.append
            )
            if announce is not None and stamped:
                await announce(stamped[-1])
            return value

        return await each_item(resources.store, body.items, one)

    add_batch_route(
        router,
        "/scheduling/reschedules",
        RescheduleBatch,
        reschedule_many,
        name="reschedule_applications",
        summary="Ask for forced scheduling passes of many applications in one request",
        item="the body of `PUT .../applications/{name}/reschedule`",
        problems="404, 409 while it is being deleted",
    )
    return router
