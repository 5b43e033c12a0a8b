"""The items of ``POST /core/events`` as plain dicts, checked by a lean schema first.

The ``Event`` model checks names, labels and moments with Python validators,
two thirds of the parse of a batch. The recorder's items need none of them:
they carry no labels (the API sets them), all three moments with their zone,
a name of the usual form. The lean schema below checks such items with
pydantic-core's own constraints only, and accepts nothing the model would
refuse (it asks more: every field, no labels, aware moments). A body it
refuses goes through the ``Event`` model, which accepts what it may and
answers the usual problem document for the rest; both give the same dicts.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    AwareDatetime,
    ConfigDict,
    Field,
    StrictInt,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic import StringConstraints as Text
from starlette.requests import Request
from starlette.responses import Response
from typing_extensions import TypedDict

from shoal.api import body as door
from shoal.api.fastpath import parse_body
from shoal.machinery.names import MAX_OBJECT_NAME, OBJECT_NAME
from shoal.model.events import Event, EventBatch

_FORBID = ConfigDict(extra="forbid", strict=True)
_NAME = OBJECT_NAME.pattern
_Nothing = Annotated[list[Any], Field(max_length=0)]


@with_config(_FORBID)
class Meta(TypedDict):
    name: Annotated[str, Text(min_length=1, max_length=MAX_OBJECT_NAME, pattern=_NAME)]
    namespace: NotRequired[str | None]
    # Only an event that went through the model has these (checked there).
    labels: NotRequired[Annotated[dict[str, str], Field(max_length=0)]]
    finalizers: NotRequired[_Nothing]
    owners: NotRequired[_Nothing]


@with_config(_FORBID)
class Involved(TypedDict):
    api: Annotated[str, Text(min_length=1)]
    kind: Annotated[str, Text(min_length=1)]
    namespace: str | None
    name: Annotated[str, Text(min_length=1)]
    uid: str | None


@with_config(_FORBID)
class Item(TypedDict):
    """One event of a batch: the fields ``shoal.api.events`` stores."""

    api: Literal["core"]
    kind: Literal["Event"]
    metadata: Meta
    involved_object: Involved
    reason: Annotated[str, Text(min_length=1, max_length=128, pattern=r"^[A-Z][A-Za-z0-9]*$")]
    message: Annotated[str, Text(max_length=4096)]
    reporting_component: Annotated[str, Text(min_length=1, max_length=128)]
    type: Literal["Normal", "Warning"]
    count: Annotated[StrictInt, Field(ge=1)]
    first_timestamp: AwareDatetime
    last_timestamp: AwareDatetime
    expires: AwareDatetime


@with_config(_FORBID)
class _Batch(TypedDict):
    events: Annotated[list[Item], Field(max_length=1000)]


_LEAN: TypeAdapter[_Batch] = TypeAdapter(_Batch)
_META_FIELDS = ("name", "namespace", "labels", "finalizers", "owners")


def _ordered(items: list[Item]) -> bool:
    return all(i["first_timestamp"] <= i["last_timestamp"] for i in items)


async def parse(request: Request) -> list[Item] | Response:
    """The batch's items, or the problem document the ``Event`` model answers for it."""
    raw = await request.body()
    with contextlib.suppress(ValidationError, door.MalformedBody):
        items = _LEAN.validate_python(door.parsed(request.scope, raw))["events"]
        if _ordered(items):
            return items
    batch = await parse_body(request, EventBatch)
    return batch if isinstance(batch, Response) else items_of(batch)


def items_of(batch: EventBatch) -> list[Item]:
    return [_item(event) for event in batch.events]


def _item(event: Event) -> Item:
    data = event.model_dump(exclude={"metadata"})
    meta = event.metadata.model_dump(include=set(_META_FIELDS))
    return Item(metadata=Meta(**meta), **data)  # type: ignore[typeddict-item]
