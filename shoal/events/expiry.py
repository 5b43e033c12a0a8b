"""Expiry of events: each is removed once its ``expires`` time (last occurrence + TTL) passed.

The garbage collector runs this sweep. Events are many and short-lived, so
they are not held in an informer: every ``interval`` seconds the sweep reads
them page by page and deletes the expired ones, a cost bounded by the number
of events kept rather than by the rate they are written at.
"""

from __future__ import annotations

import asyncio
import logging
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
            expires = Event.model_validate(item).expires
            if expires is None or expires > now:
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
