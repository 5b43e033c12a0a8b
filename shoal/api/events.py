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
import time
from dataclasses import dataclass
from datetime import UTC
from functools import lru_cache
from typing import Any

import orjson
from fastapi import APIRouter, Body
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shoal.api.batch import each_item, results_response
from shoal.api.codec import rfc3339
from shoal.api.event_items import Item, items_of, parse
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.events import metrics
from shoal.machinery.problems import ProblemError
from shoal.model.base import Metadata, check_label_value, utcnow
from shoal.model.events import KIND_LABEL, NAME_LABEL, UID_LABEL, Event, EventBatch
from shoal.model.validation.kinds import involved_in_namespace
from shoal.store.base import AlreadyExists

PATH = "/core/events"


#: A new event's stored metadata before the server fills it, in the model's field order.
_METADATA = Metadata(name="x").model_dump(mode="json")


def stored(item: Item, namespace: str, now: str, uid: str) -> bytes:
    """The stored form of a new event, built as a dict (a fifth of ``encode``'s CPU).

    Events arrive by the thousand in a burst of placements: they skip the model
    round trip of a generic create, with the same server-set metadata (``now``
    is the batch's one server time). orjson spells the moments, in UTC with a Z.
    """
    meta = item["metadata"]
    metadata = dict(_METADATA, name=meta["name"], namespace=namespace, uid=uid)
    metadata.update(labels=_labels(item), created=now, modified=now)
    finalizers, owners = meta.get("finalizers"), meta.get("owners")
    if finalizers or owners:
        metadata.update(finalizers=finalizers or [], owners=owners or [])
    first, last, expires = item["first_timestamp"], item["last_timestamp"], item["expires"]
    data = {
        "api": "core",
        "kind": "Event",
        "metadata": metadata,
        "involved_object": item["involved_object"],
        "reason": item["reason"],
        "message": item["message"],
        "reporting_component": item["reporting_component"],
        "type": item["type"],
        "count": item["count"],
        "first_timestamp": first.astimezone(UTC) if first.utcoffset() else first,
        "last_timestamp": last.astimezone(UTC) if last.utcoffset() else last,
        "expires": expires.astimezone(UTC) if expires.utcoffset() else expires,
    }  # moments in UTC, so stored moments compare as strings
    return orjson.dumps(data, option=orjson.OPT_UTC_Z)


def _labels(item: Item) -> dict[str, str]:
    """The event's labels and the involved object's kind, name and uid (when label values
    can hold them): the server labels events, so every writer's are found by the object's
    selector and a batch carries and validates no labels of its own."""
    involved = item["involved_object"]
    extra = item["metadata"].get("labels")
    labels = dict(extra) if extra else {}
    if _kind_label(involved["kind"]):
        labels[KIND_LABEL] = involved["kind"]
        if _label_value(involved["name"]):
            labels[NAME_LABEL] = involved["name"]
        uid = involved.get("uid")
        if uid and _label_value(uid):
            labels[UID_LABEL] = uid
    return labels


def _label_value(value: str) -> bool:
    try:
        check_label_value(value)
    except ValueError:
        return False
    return True


_kind_label = lru_cache(maxsize=256)(_label_value)  # kinds are few: each checked once


@lru_cache(maxsize=256)
def _prefix(namespace: str) -> str:
    return Event.key_prefix(namespace)


def new_uids(n: int) -> list[str]:
    """``n`` random (version 4) UUIDs from one read of the system's randomness."""
    h = os.urandom(16 * n).hex()
    return [
        f"{h[i : i + 8]}-{h[i + 8 : i + 12]}-4{h[i + 13 : i + 16]}-"
        f"{'89ab'[int(h[i + 16], 16) & 3]}{h[i + 17 : i + 20]}-{h[i + 20 : i + 32]}"
        for i in range(0, 32 * n, 32)
    ]


async def record(resources: Resources, one: BatchEvent, now: str) -> bytes | int:
    """Create the item's event (answers its revision), or add its count to the stored one."""
    item, namespace = one.item, one.namespace
    for finding in involved_in_namespace(item["involved_object"]["namespace"], namespace):
        raise ProblemError(422, f"{finding.field}: {finding.reason}", errors=[finding.as_error()])
    value = stored(item, namespace, now, one.uid)
    try:
        return await resources.store.create(_prefix(namespace) + one.name, value)
    except AlreadyExists:
        pass
    count, message, type_ = item["count"], item["message"], item["type"]
    last, expires = rfc3339(item["last_timestamp"]), rfc3339(item["expires"])

    def bump(data: dict[str, Any]) -> None:
        data["count"] = int(data.get("count") or 0) + count
        data["message"] = message
        data["type"] = type_
        if (data.get("last_timestamp") or "") < last:
            data["last_timestamp"] = last
        if (data.get("expires") or "") < expires:
            data["expires"] = expires

    return await resources.swap_json(Event, one.name, namespace, None, bump)


@dataclass(slots=True)
class BatchEvent:
    """An event to write: results name it by namespace and name; ``uid`` is the new one's."""

    namespace: str
    name: str
    item: Item
    uid: str


async def record_many(resources: Resources, items: list[Item]) -> list[dict[str, Any]]:
    now = rfc3339(utcnow())
    ones = [
        BatchEvent(i["metadata"].get("namespace") or "default", i["metadata"]["name"], i, uid)
        for i, uid in zip(items, new_uids(len(items)), strict=True)
    ]

    async def act(one: BatchEvent) -> bytes | int:
        return await record(resources, one, now)

    return await each_item(resources.store, ones, act)


def fast_route(resources: Resources) -> Route:
    """``POST /core/events`` without FastAPI's machinery (as ``shoal.api.fastpath``'s routes):
    matched first; the FastAPI route of ``build_router`` documents it."""

    async def record_events(request: Request) -> Response:
        request.scope["route"] = route  # the metrics middleware labels by route
        await request.body()  # received first: the CPU counted below is the batch's own
        start = time.thread_time()
        items = await parse(request)
        if isinstance(items, Response):
            return items
        answer = results_response(await record_many(resources, items))
        metrics.STORE_CPU.inc(time.thread_time() - start)
        metrics.STORED.inc(len(items))
        return answer

    route = Route(PATH, record_events, methods=["POST"])
    return route


def build_router(resources: Resources) -> APIRouter:
    router = APIRouter(route_class=StrictJsonRoute)

    async def record_events(body: EventBatch = Body()) -> Any:
        return results_response(await record_many(resources, items_of(body)))

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
