"""Events in group ``core``: what happened to an object, as Kubernetes Events tell it.

An event names the object it is about, a reason (a CamelCase word such as
``Scheduled``), a message that carries the numbers, the component that
reported it, a type (Normal or Warning), how often it happened and when first
and last. Repeats are one event whose ``count`` grows (``shoal.events``
dedupes them and writes in batches); events expire an hour after their last
occurrence by default (``expires``, swept by ``shoal.events.expiry``).
"""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Literal

from pydantic import Field, StrictInt, model_validator

from shoal.model.base import Kind, Model, Moment, utcnow

#: Default seconds an event is kept after its last occurrence.
DEFAULT_TTL = 3600.0

#: Labels naming the involved object, set on every event ``POST /core/events`` writes:
#: a label selector finds an object's events.
KIND_LABEL = "involved.shoal/kind"
NAME_LABEL = "involved.shoal/name"
#: and its uid: an object recreated under the same name has its own events.
UID_LABEL = "involved.shoal/uid"

EventType = Literal["Normal", "Warning"]


class InvolvedObject(Model):
    """The object an event is about (its uid tells a recreated object from the old one)."""

    api: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    namespace: str | None = None
    name: str = Field(min_length=1)
    uid: str | None = None


class Event(Kind):
    api: Literal["core"] = "core"
    kind: Literal["Event"] = "Event"
    involved_object: InvolvedObject
    reason: str = Field(
        min_length=1, max_length=128, pattern=r"^[A-Z][A-Za-z0-9]*$", description="CamelCase."
    )
    message: str = Field(default="", max_length=4096)
    reporting_component: str = Field(min_length=1, max_length=128)
    type: EventType = "Normal"
    count: StrictInt = Field(default=1, ge=1)
    first_timestamp: Moment | None = None
    last_timestamp: Moment | None = None
    expires: Moment | None = Field(
        default=None, description="When the event may be removed (default: last + 1 h)."
    )


    @model_validator(mode="after")
    def _timestamps(self) -> Event:
        """Fill what a writer left out: now, and an hour after the last occurrence."""
        for name in ("first_timestamp", "last_timestamp", "expires"):
            moment = getattr(self, name)
            if moment is not None and moment.tzinfo is None:  # naive means UTC
                setattr(self, name, moment.replace(tzinfo=UTC))
        if self.last_timestamp is None:
            self.last_timestamp = self.first_timestamp or utcnow()
        if self.first_timestamp is None:
            self.first_timestamp = self.last_timestamp
        if self.first_timestamp > self.last_timestamp:
            raise ValueError("first_timestamp must not be after last_timestamp")
        if self.expires is None:
            self.expires = self.last_timestamp + timedelta(seconds=DEFAULT_TTL)
        return self


class EventBatch(Model):
    """Body of ``POST /core/events`` (Shoal addition): many occurrences, one request.

    Each item is an event whose ``count`` is the number of occurrences it
    reports; an event of the same namespace and name that exists already is
    bumped by that count (its message, last timestamp and expiry replaced).
    """

    events: list[Event] = Field(max_length=1000)
