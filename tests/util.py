"""Small helpers shared by the tests: free ports and waiting on conditions."""

from __future__ import annotations

import asyncio
import inspect
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for(
    condition: Callable[[], T | Awaitable[T]],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        last = result  # type: ignore[assignment]
        if result:
            return result  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}: {last!r}")
        await asyncio.sleep(interval)
