"""What a Shoal installation runs, and what each of its processes shares.

Every component once: the controllers and how each is built (``CONTROLLERS``,
``controllers``), the store URL, logging, and running until a signal. ``shoal api``, each
controller alone, ``shoal up`` in one process or in many, all start from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import uvloop
from rich.console import Console

console = Console()

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="sqlite:///path/shoal.db or etcd://host:port[,host:port...] "
        "(default: $SHOAL_STORE, else 'store:' in the config file, else a SQLite file)",
    ),
]
ENV_STORE = "SHOAL_STORE"


def resolve_store(option: str | None, default: Path) -> str:
    """``--store``, else $SHOAL_STORE, else the config's ``store``, else SQLite at ``default``."""
    from shoal.cli.config import load_config
    from shoal.cli.errors import CliError
    from shoal.cli.locations import config_path

    url = option or os.environ.get(ENV_STORE) or None
    if url is None:
        configured = load_config().get("store")
        if configured is not None and not isinstance(configured, str):
            raise CliError(f"config file {config_path()}: 'store' must be a URL string")
        url = configured or f"sqlite://{default.resolve()}"
    if not url.startswith(("sqlite://", "etcd://")):
        raise CliError(f"unknown store URL {url!r}: use sqlite:///path or etcd://host:port[,...]")
    return url


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

    # Informer caches and stores hold hundreds of thousands of small objects: collect the
    # young generation less often, so that full collections do not keep walking them all
    # (two thirds of a task controller's time went to the collector at 10,000 applications).
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    uvloop.run(runner())


def _kube_controller(client: Any) -> Any:
    from shoal.kube.controller import KubeController

    return KubeController(client)


def _cluster_observer(client: Any) -> Any:
    from shoal.kube.observer import ClusterObserver

    return ClusterObserver(client)


def _garbage_collector(client: Any) -> Any:
    from shoal.gc.controller import GarbageCollector

    return GarbageCollector(client)


def _reschedule_controller(client: Any) -> Any:
    from shoal.reschedule.controller import RescheduleTaskController

    return RescheduleTaskController(client)


CONTROLLERS: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("kube-controller", "Run the Kubernetes application controller alone.", _kube_controller),
    ("cluster-observer", "Run the cluster observer alone.", _cluster_observer),
    ("garbage-collector", "Run the garbage collector alone.", _garbage_collector),
    ("reschedule-controller", "Run the RescheduleTask controller alone.", _reschedule_controller),
]


def controllers(client_of: Callable[[str], Any], scheduler_config: Path | None = None) -> list[Any]:
    """Every controller, each on the client of its own identity (``client_of(component)``)."""
    from shoal.model.scheduler_config import SchedulerConfig
    from shoal.scheduler.scheduler import Scheduler

    cfg = SchedulerConfig.load(scheduler_config)
    return [Scheduler(client_of("scheduler"), cfg)] + [
        build(client_of(name)) for name, _, build in CONTROLLERS
    ]
