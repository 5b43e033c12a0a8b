"""Every item of a paged list: Kubernetes' and Shoal's ``continue`` tokens, followed to the end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Page = dict[str, Any]


async def every_item(
    get: Callable[[dict[str, object]], Awaitable[Page]], limit: int | None = None
) -> list[Page]:
    """The items of every page ``get(query)`` answers, asking ``limit`` items a page."""
    items: list[Page] = []
    query: dict[str, object] = {} if limit is None else {"limit": limit}
    while True:
        page = await get(query)
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        query = {**query, "continue": token}
