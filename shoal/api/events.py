"""``POST /core/events``: many event occurrences in one request and one store commit.

Components report events through ``shoal.events.Recorder``, which dedupes
repeats and sends what gathered since its last flush here: an event that is
new is created, one that exists (same namespace and name) is bumped by the
item's ``count`` with its message, last timestamp and expiry replaced, each
through a compare-and-swap, so nothing is lost or counted twice when two
writers report the same event.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from fastapi import APIRouter, Body
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shoal.api.batch import each_item, results_response
from shoal.api.codec import rfc3339, with_revision
from shoal.api.fastpath import _body as parse_body
from shoal.api.resources import Resources
from shoal.api.routes import StrictJsonRoute
from shoal.model.base import Metadata, utcnow
from shoal.model.events import Event, EventBatch
from shoal.store.base import AlreadyExists

PATH = "/core/events"


#: A new event's stored metadata before the server fills it, in the model's field order.
_METADATA = Metadata(name="x").model_dump(mode="json")


def stored(event: Event, namespace: str) -> bytes:
    """The stored form of a new event, built as a dict (a fifth of ``encode``'s CPU).

    Events arrive by the thousand in a burst of placements: they skip the model
    round trip of a generic create, with the same server-set metadata.
    """
    now = rfc3339(utcnow())
    meta = event.metadata
    metadata = dict(_METADATA, name=meta.name, namespace=namespace, uid=str(uuid.uuid4()))
    metadata.update(labels=meta.labels, created=now, modified=now)
    if meta.finalizers or meta.owners:
        metadata.update(
            finalizers=meta.finalizers, owners=[o.model_dump(mode="json") for o in meta.owners]
        )
    involved = event.involved_object
    data = {
        "api": "core",
        "kind": "Event",
        "metadata": metadata,
        "involved_object": {
            "api": involved.api,
            "kind": involved.kind,
            "namespace": involved.namespace,
            "name": involved.name,
            "uid": involved.uid,
        },
        "reason": event.reason,
        "message": event.message,
        "reporting_component": event.reporting_component,
        "type": event.type,
        "count": event.count,
        "first_timestamp": _spell(event.first_timestamp),
        "last_timestamp": _spell(event.last_timestamp),
        "expires": _spell(event.expires),
    }
    return orjson.dumps(data)


def _spell(moment: datetime | None) -> str | None:
    return None if moment is None else rfc3339(moment)


async def record(resources: Resources, event: Event) -> bytes:
    """Create ``event``, or add its count to the stored one of the same name."""
    namespace = event.metadata.namespace or "default"
    value = stored(event, namespace)
    try:
        revision = await resources.store.create(Event.key(event.metadata.name, namespace), value)
        return with_revision(value, revision)
    except AlreadyExists:
        pass
    last = rfc3339(event.last_timestamp) if event.last_timestamp else None
    expires = rfc3339(event.expires) if event.expires else None

    def bump(data: dict[str, Any]) -> None:
        data["count"] = int(data.get("count") or 0) + event.count
        data["message"] = event.message
        data["type"] = event.type
        if last is not None and (data.get("last_timestamp") or "") < last:
            data["last_timestamp"] = last
        if expires is not None and (data.get("expires") or "") < expires:
            data["expires"] = expires

    return await resources.swap_json(Event, event.metadata.name, namespace, None, bump)


@dataclass(slots=True)
class _Item:
    """An event as a batch item: results name it by namespace and name."""

    namespace: str
    name: str
    event: Event


async def record_many(resources: Resources, batch: EventBatch) -> list[dict[str, Any]]:
    items = [
        _Item(e.metadata.namespace or "default", e.metadata.name, e) for e in batch.events
    ]

    async def act(item: _Item) -> bytes:
        return await record(resources, item.event)

    return await each_item(resources.store, items, act)


def fast_route(resources: Resources) -> Route:
    """``POST /core/events`` without FastAPI's machinery (as ``shoal.api.fastpath``'s routes):
    matched first; the FastAPI route of ``build_router`` documents it."""

    async def record_events(request: Request) -> Response:
        request.scope["route"] = route  # the metrics middleware labels by route
        batch = await parse_body(request, EventBatch)
        if isinstance(batch, Response):
            return batch
        return results_response(await record_many(resources, batch))

    route = Route(PATH, record_events, methods=["POST"])
    return route


def build_router(resources: Resources) -> APIRouter:
    router = APIRouter(route_class=StrictJsonRoute)

    async def record_events(body: EventBatch = Body()) -> Any:
        return results_response(await record_many(resources, body))

    router.add_api_route(
        PATH,
        record_events,
        methods=["POST"],
        name="record_events",
        summary="Record many events in one request: new ones are created, repeats counted",
        description=(
            "Each item is an Event whose `count` is the number of occurrences it reports; "
            "one that exists already (same namespace and name) gets its count raised by it "
            "and its message, type, last timestamp and expiry replaced. The answer has one "
            "result per item, in order: `status` 200 with the new `resource_version`, or the "
            "status, title and detail of its problem. Writing needs `create` on `core/events` "
            "in every namespace."
        ),
        tags=["core"],
    )
    return router
