"""``POST /core/events``: many event occurrences in one request and one store commit.

Components report events through ``shoal.events.Recorder``, which dedupes
repeats and sends what gathered since its last flush here: an event that is
new is created, one that exists (same namespace and name) is bumped by the
item's ``count`` with its message, last timestamp and expiry replaced, each
through a compare-and-swap, so nothing is lost or counted twice when two
writers report the same event.
"""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from fastapi import APIRouter, Body
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shoal.api.batch import each_item, results_response
from shoal.api.codec import rfc3339
from shoal.api.fastpath import _body as parse_body
from shoal.api.resources import Resources
from shoal.api.routes import StrictJsonRoute
from shoal.model.base import Metadata, check_label_value, utcnow
from shoal.model.events import KIND_LABEL, NAME_LABEL, Event, EventBatch
from shoal.store.base import AlreadyExists

PATH = "/core/events"


#: A new event's stored metadata before the server fills it, in the model's field order.
_METADATA = Metadata(name="x").model_dump(mode="json")
_ZERO = timedelta(0)


def stored(event: Event, namespace: str, now: str, uid: str) -> bytes:
    """The stored form of a new event, built as a dict (a fifth of ``encode``'s CPU).

    Events arrive by the thousand in a burst of placements: they skip the model
    round trip of a generic create, with the same server-set metadata (``now``
    is the batch's one server time). orjson spells the moments, in UTC with a Z.
    """
    meta, involved = event.metadata, event.involved_object
    metadata = dict(_METADATA, name=meta.name, namespace=namespace, uid=uid)
    metadata.update(labels=_labels(event), created=now, modified=now)
    if meta.finalizers or meta.owners:
        metadata.update(
            finalizers=meta.finalizers, owners=[o.model_dump(mode="json") for o in meta.owners]
        )
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
        "first_timestamp": _utc(event.first_timestamp),
        "last_timestamp": _utc(event.last_timestamp),
        "expires": _utc(event.expires),
    }
    return orjson.dumps(data, option=orjson.OPT_UTC_Z)


def _labels(event: Event) -> dict[str, str]:
    """The event's labels and the involved object's kind and name (when label values can
    hold them): the server labels events, so every writer's are found by the object's
    selector and a batch carries and validates no labels of its own."""
    labels = dict(event.metadata.labels)
    involved = event.involved_object
    with suppress(ValueError):
        labels[KIND_LABEL] = check_label_value(involved.kind)
        labels[NAME_LABEL] = check_label_value(involved.name)
    return labels


def _utc(moment: datetime | None) -> datetime | None:
    """``moment`` in UTC, so stored moments compare as strings."""
    if moment is None or moment.utcoffset() == _ZERO:
        return moment
    return moment.astimezone(UTC)


def _uids(n: int) -> list[str]:
    """``n`` random (version 4) UUIDs from one read of the system's randomness."""
    h = os.urandom(16 * n).hex()
    return [
        f"{h[i : i + 8]}-{h[i + 8 : i + 12]}-4{h[i + 13 : i + 16]}-"
        f"{'89ab'[int(h[i + 16], 16) & 3]}{h[i + 17 : i + 20]}-{h[i + 20 : i + 32]}"
        for i in range(0, 32 * n, 32)
    ]


async def record(resources: Resources, item: _Item, now: str) -> bytes | int:
    """Create the item's event (answers its revision), or add its count to the stored one."""
    event, namespace = item.event, item.namespace
    value = stored(event, namespace, now, item.uid)
    try:
        return await resources.store.create(Event.key(item.name, namespace), value)
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

    return await resources.swap_json(Event, item.name, namespace, None, bump)


@dataclass(slots=True)
class _Item:
    """An event as a batch item: results name it by namespace and name."""

    namespace: str
    name: str
    event: Event
    uid: str


async def record_many(resources: Resources, batch: EventBatch) -> list[dict[str, Any]]:
    now = rfc3339(utcnow())
    uids = _uids(len(batch.events))
    items = [
        _Item(e.metadata.namespace or "default", e.metadata.name, e, uid)
        for e, uid in zip(batch.events, uids, strict=True)
    ]

    async def act(item: _Item) -> bytes | int:
        return await record(resources, item, now)

    return await each_item(resources.store, items, act)


async def _parse(request: Request) -> EventBatch | Response:
    """The batch, validated straight from the bytes (no dict of the whole body first).

    Only a body that fails goes the generic way, for the same problem document.
    """
    try:
        return EventBatch.model_validate_json(await request.body())
    except ValidationError:
        return await parse_body(request, EventBatch)


def fast_route(resources: Resources) -> Route:
    """``POST /core/events`` without FastAPI's machinery (as ``shoal.api.fastpath``'s routes):
    matched first; the FastAPI route of ``build_router`` documents it."""

    async def record_events(request: Request) -> Response:
        request.scope["route"] = route  # the metrics middleware labels by route
        batch = await _parse(request)
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
            "status, title and detail of its problem. Every event written is labelled "
            "`involved.shoal/kind` and `involved.shoal/name` after its involved object, so a "
            "label selector finds an object's events. Writing needs `create` on `core/events` "
            "in every namespace."
        ),
        tags=["core"],
    )
    return router
