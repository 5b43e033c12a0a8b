"""Stopping background tasks: cancel each, then wait until each has ended.

Every component that owns tasks stops them this one way, so that none is left running
past its owner's stop and none's failure escapes the stop (it was logged where it ran).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel every task, then wait for each to end, whatever it ends with."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
