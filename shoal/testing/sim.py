"""Simulated clusters (``shoal.sim``) for the duration of a block, for tests and benches."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from shoal.sim.server import SimServer, start_sim


@asynccontextmanager
async def running_sim(**options: Any) -> AsyncIterator[SimServer]:
    """``start_sim(**options)``, stopped on exit whatever happened inside."""
    server = await start_sim(**options)
    try:
        yield server
    finally:
        await server.stop()
