"""Expiry of events: each is removed once its ``expires`` time (last occurrence + TTL) passed.

The garbage collector runs this sweep. Events are many and short-lived, so
they are not held in an informer: every ``interval`` seconds the sweep reads
them page by page and deletes the expired ones, a cost bounded by the number
of events kept rather than by the rate they are written at.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from shoal.client.rest import ApiError, NotFound, ShoalClient, Unreachable
from shoal.model.base import utcnow
from shoal.model.events import Event

log = logging.getLogger(__name__)

PAGE = 500


async def expire_once(client: ShoalClient) -> int:
    """Delete every expired event now; how many were deleted."""
    now = utcnow()
    deleted = 0
    params: dict[str, Any] = {"limit": PAGE}
    while True:
        data = await client.request("GET", "/core/events", params=params)
        for item in data["items"]:
            # The one field read, not the model (a fiftieth of the CPU): the sweep reads
            # every event kept, each minute.
            expires = item.get("expires")
            if expires is None or _moment(expires) > now:
                continue
            meta = item["metadata"]
            try:
                await client.delete(Event, meta["name"], meta["namespace"])
                deleted += 1
            except NotFound:
                continue
        token = data["metadata"].get("continue")
        if not token:
            return deleted
        params["continue"] = token


def _moment(text: str) -> datetime:
    """A stored moment (pydantic's or orjson's RFC 3339; naive means UTC)."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def run_expiry(client: ShoalClient, interval: float = 60.0) -> None:
    """Sweep for ever; a failed sweep is logged and tried again next time."""
    while True:
        try:
            removed = await expire_once(client)
            if removed:
                log.info("expired %d events", removed)
        except (ApiError, Unreachable) as error:
            log.warning("expiring events: %s", error)
        await asyncio.sleep(interval)
