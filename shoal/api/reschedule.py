"""Reschedule requests: the ``reschedule`` subresource of applications and its batch form.

``PUT /kubernetes/namespaces/{ns}/applications/{name}/reschedule`` with
``{"requested": "<rfc3339>"}`` moves ``status.reschedule_requested`` forward
and never back, so a task controller may repeat it after a crash at no cost.
When the application was scheduled at or after ``requested`` (a routine pass
between the task's creation and this call), the request is stamped with the
server's current time instead, so the scheduler still makes a forced pass:
the trigger is always later than the last scheduling it must override.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Body, Path
from starlette.responses import Response

from shoal.api.batch import add_batch_route, each_item
from shoal.api.codec import rfc3339
from shoal.api.errors import ProblemError
from shoal.api.resources import Resources
from shoal.model.base import utcnow
from shoal.model.kubernetes import Application
from shoal.model.scheduling import RescheduleBatch, RescheduleItem, RescheduleRequest

_NAME = r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$"


def _parse(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def request_reschedule(
    resources: Resources, name: str, namespace: str, requested: datetime
) -> bytes:
    """Stamp a reschedule request on an application (idempotent; only moves forward)."""
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
        return True

    return await resources.swap_json(Application, name, namespace, None, stamp)


def build_router(resources: Resources) -> APIRouter:
    router = APIRouter()

    async def reschedule(
        namespace: str = Path(min_length=1, max_length=63, pattern=_NAME),
        name: str = Path(min_length=1, max_length=63, pattern=_NAME),
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
        async def one(item: RescheduleItem) -> bytes:
            return await request_reschedule(resources, item.name, item.namespace, item.requested)

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
