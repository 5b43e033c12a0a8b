"""What every Shoal process does the same way: log, run on uvloop until a signal, spawn.

The API, the scheduler, each controller, the agents and ``shoal up`` itself, in one
process or in many, start from here and from ``shoal.system.components``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop
from rich.console import Console

from shoal.machinery.memory import tune_gc

console = Console()
"""What ``shoal up`` and the process commands print for people (logs go to stderr)."""

SHOAL_MAIN = "shoal.cli.main"
"""The module every child process runs: a component is started as an operator would."""


def shoal_argv(*args: str, module: str = SHOAL_MAIN) -> list[str]:
    """The command line of ``shoal ARGS`` in a child process (this interpreter)."""
    return [sys.executable, "-m", module, *args]


def configure_logging(level: str, one_line: bool = False) -> None:
    """Log to stderr; ``one_line``: an error a process recovers from is one line, no traceback."""
    handler = logging.StreamHandler()
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    handler.setFormatter(OneLineFormatter(fmt) if one_line else logging.Formatter(fmt))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])


class OneLineFormatter(logging.Formatter):
    """The exception of a record as ``(Type: message)`` after it, not as a traceback.

    ``shoal up`` recovers from what it logs (a cluster not reachable yet, a
    connection dropped at a restart); a newcomer should see what happened,
    not a stack. ``--log-level debug`` keeps the tracebacks.
    """

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record = logging.makeLogRecord(record.__dict__)
            record.msg = f"{record.getMessage()} ({type(error).__name__}: {error})"
            record.args = None
            record.exc_info = record.exc_text = None
        return super().format(record)


def _loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Errors the event loop reports (a callback or task that failed) as one warning line."""
    error = context.get("exception")
    suffix = f" ({type(error).__name__}: {error})" if error is not None else ""
    logging.getLogger("shoal.up").warning("%s%s", context.get("message", "loop error"), suffix)


def run_until_signal(main: Callable[[], Awaitable[None]], quiet: bool = False) -> None:
    """Run ``main`` on uvloop until it returns or SIGINT/SIGTERM arrives, then clean up.

    uvloop (with httptools, which uvicorn picks up by itself) serves about 25%
    more API requests per second than asyncio's loop and h11.
    """

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()
        if quiet:
            loop.set_exception_handler(_loop_error)
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    tune_gc()
    uvloop.run(runner())
