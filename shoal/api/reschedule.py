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

import orjson
from fastapi import APIRouter, Body, Path
from starlette.responses import Response

from shoal.api.codec import revision_of, with_revision
from shoal.api.errors import ProblemError
from shoal.model.base import utcnow
from shoal.model.kubernetes import Application
from shoal.model.scheduling import RescheduleBatch, RescheduleRequest
from shoal.store.base import Conflict, NotFound, Store

_CAS_ATTEMPTS = 20
_NAME = r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$"


def _spell(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def request_reschedule(store: Store, name: str, namespace: str, requested: datetime) -> bytes:
    """Stamp a reschedule request on an application (idempotent; only moves forward)."""
    if requested.tzinfo is None:
        requested = requested.replace(tzinfo=UTC)
    key = Application.key(name, namespace)
    for _ in range(_CAS_ATTEMPTS):
        try:
            record = await store.get(key)
        except NotFound:
            raise ProblemError(
                404, f"Application {name!r} not found in namespace {namespace!r}"
            ) from None
        data = orjson.loads(record.value)
        if data["metadata"].get("deleted") is not None:
            raise ProblemError(409, f"Application {name!r} is being deleted")
        status = data.setdefault("status", {})
        current = _parse(status.get("reschedule_requested"))
        if current is not None and current >= requested:
            return with_revision(record.value, record.revision)  # already asked for
        last = _parse(status.get("last_scheduled"))
        stamp = requested if last is None or last < requested else utcnow()
        status["reschedule_requested"] = _spell(stamp)
        value = orjson.dumps(data)
        try:
            revision = await store.update(key, value, record.revision)
        except Conflict:
            continue
        except NotFound:
            raise ProblemError(404, f"Application {name!r} not found") from None
        return with_revision(value, revision)
    raise ProblemError(409, f"Application {name!r} is changing too fast; try again")


def build_router(store: Store) -> APIRouter:
    router = APIRouter()

    async def reschedule(
        namespace: str = Path(min_length=1, max_length=63, pattern=_NAME),
        name: str = Path(min_length=1, max_length=63, pattern=_NAME),
        body: RescheduleRequest = Body(),
    ) -> Response:
        value = await request_reschedule(store, name, namespace, body.requested)
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

    async def reschedule_many(body: RescheduleBatch = Body()) -> Response:
        results: list[dict[str, Any]] = []
        async with store.batch():  # one commit for the whole request
            for item in body.items:
                result: dict[str, Any] = {"namespace": item.namespace, "name": item.name}
                try:
                    value = await request_reschedule(
                        store, item.name, item.namespace, item.requested
                    )
                    result["status"] = 200
                    result["resource_version"] = revision_of(value)
                except ProblemError as error:
                    result.update(status=error.status, title=error.title, detail=error.detail)
                results.append(result)
        return Response(orjson.dumps({"results": results}), media_type="application/json")

    router.add_api_route(
        "/scheduling/reschedules",
        reschedule_many,
        methods=["POST"],
        name="reschedule_applications",
        summary="Ask for forced scheduling passes of many applications in one request",
        description=(
            "Each item is the body of `PUT .../applications/{name}/reschedule` plus the "
            "application's namespace and name. The answer has one result per item, in order: "
            "`status` 200 with the new `resource_version`, or the status, title and detail of "
            "its problem (404, 409 while it is being deleted)."
        ),
        tags=["scheduling"],
    )
    return router
