"""Waiting on a condition with a deadline: what tests do instead of sleeping."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def wait_for(
    condition: Callable[[], Awaitable[T | None]],
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


@overload
async def wait_for(
    condition: Callable[[], T | None],
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


async def wait_for(
    condition: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> Any:
    """Poll ``condition`` (sync or async) until it returns a truthy value or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}: {result!r}")
        await asyncio.sleep(interval)
