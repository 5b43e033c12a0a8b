"""Process commands: ``shoal api``, ``shoal scheduler``, each controller alone, ``shoal up``.

``shoal up`` (the embedded all-in-one) is in ``shoal.cli.up``; this module has
what every process shares: the store URL, logging, running until a signal.
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

ApiOption = Annotated[
    str | None, typer.Option("--api", help="URL of the Shoal API (default: $SHOAL_API)")
]
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
    from shoal.cli.config import config_path, load_config
    from shoal.cli.errors import CliError

    url = option or os.environ.get(ENV_STORE) or None
    if url is None:
        configured = load_config().get("store")
        if configured is not None and not isinstance(configured, str):
            raise CliError(f"config file {config_path()}: 'store' must be a URL string")
        url = configured or f"sqlite://{default.resolve()}"
    if not url.startswith(("sqlite://", "etcd://")):
        raise CliError(f"unknown store URL {url!r}: use sqlite:///path or etcd://host:port[,...]")
    return url


def _logging(level: str, one_line: bool = False) -> None:
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


def _run_until_signal(main: Callable[[], Awaitable[None]], quiet: bool = False) -> None:
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


def api(
    store: StoreOption = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8080,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Security configuration: Krake's api.yaml keys (authentication, "
            "authorization, tls) and Shoal's (secrets, audit, limits); without it, open",
        ),
    ] = None,
) -> None:
    """Run the API server alone."""
    from shoal.api.auth.config import load
    from shoal.api.server import start_api

    _logging(log_level)
    store_url = resolve_store(store, Path("shoal.db"))
    security = load(config) if config is not None else None

    async def main() -> None:
        server = await start_api(store_url, host, port, log_level="warning", security=security)
        console.print(f"Shoal API listening on [bold]{server.url}[/] (store {store_url})")
        try:
            await server.task
        finally:
            await server.stop()

    _run_until_signal(main)


LeaderElect = Annotated[
    bool,
    typer.Option(
        "--leader-elect/--no-leader-elect",
        help="Act only while holding the lease, so that several replicas run safely",
    ),
]
LeaseDuration = Annotated[
    float,
    typer.Option("--lease-duration", min=0.5, help="Seconds a standby waits before taking over"),
]
Identity = Annotated[
    str | None, typer.Option("--identity", help="Name in the lease (default: hostname-pid)")
]
MetricsPort = Annotated[
    int,
    typer.Option("--metrics-port", min=0, help="Serve this process's /metrics on this port"),
]
LogLevel = Annotated[str, typer.Option("--log-level")]


def _run_controller(
    factory: Callable[[Any], Any],
    api_url: str | None,
    *,
    leader_elect: bool,
    lease_duration: float,
    lease_name: str,
    identity: str | None,
    metrics_port: int,
    log_level: str,
) -> None:
    """Run one controller alone against an API, optionally only while it holds a lease.

    It authenticates as itself: $SHOAL_TOKEN or $SHOAL_CERT/$SHOAL_KEY, else ``token``,
    ``cert``, ``key`` (and ``ca``) of the config file.
    """
    from shoal.cli.config import credentials, resolve_api
    from shoal.client.rest import ShoalClient

    _logging(log_level)
    url = resolve_api(api_url)
    if metrics_port:
        from prometheus_client import start_http_server

        # Loopback unless an operator says otherwise: the metrics name namespaces and clusters.
        start_http_server(metrics_port, addr=os.environ.get("SHOAL_METRICS_HOST", "127.0.0.1"))

    async def main() -> None:
        # Read once the signal handlers are in place: a SIGTERM at start-up stops cleanly.
        found = credentials()
        auth: dict[str, Any] = {"token": found.token, "ssl_context": found.ssl_context()}
        async with ShoalClient(url, **auth) as client:
            if not leader_elect:
                await factory(client).run()
                return
            from shoal.controllers.elected import run_elected

            # The elector's own connections: renewals never queue behind the controller's.
            async with ShoalClient(url, timeout=lease_duration / 3, **auth) as lease_client:
                await run_elected(
                    lambda: factory(client), lease_client, lease_name, identity, lease_duration
                )

    _run_until_signal(main)


def scheduler(
    api_url: ApiOption = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Scheduler YAML configuration")
    ] = None,
    leader_elect: LeaderElect = False,
    lease_duration: LeaseDuration = 15.0,
    lease_name: Annotated[str, typer.Option("--lease-name", help="Lease to campaign for")] = (
        "scheduler"
    ),
    identity: Identity = None,
    metrics_port: MetricsPort = 0,
    log_level: LogLevel = "info",
    flavour: Annotated[
        str,
        typer.Option(
            "--flavour", help="API to drive: 'shoal', or 'krake' (a Krake 1.0.1 API server)."
        ),
    ] = "shoal",
) -> None:
    """Run the scheduler alone against an API."""
    from shoal.scheduler.config import SchedulerConfig
    from shoal.scheduler.scheduler import Scheduler

    if flavour not in ("shoal", "krake"):
        raise typer.BadParameter("'shoal' or 'krake'", param_hint="--flavour")
    cfg = SchedulerConfig.load(config)

    def build(client: Any) -> Scheduler:
        if flavour == "krake":
            from shoal.scheduler.krake import KrakeApi

            client = KrakeApi.like(client)
        return Scheduler(client, cfg)

    run = _controller_command("scheduler", "", build)
    run(api_url, leader_elect, lease_duration, lease_name, identity, metrics_port, log_level)


def _controller_command(name: str, doc: str, build: Callable[[Any], Any]) -> Any:
    """A ``shoal NAME --api URL [--leader-elect]`` command running one controller."""

    def command(
        api_url: ApiOption = None,
        leader_elect: LeaderElect = False,
        lease_duration: LeaseDuration = 15.0,
        lease_name: Annotated[
            str, typer.Option("--lease-name", help="Lease to campaign for")
        ] = name,
        identity: Identity = None,
        metrics_port: MetricsPort = 0,
        log_level: LogLevel = "info",
    ) -> None:
        _run_controller(
            build,
            api_url,
            leader_elect=leader_elect,
            lease_duration=lease_duration,
            lease_name=lease_name,
            identity=identity,
            metrics_port=metrics_port,
            log_level=log_level,
        )

    command.__doc__ = doc
    return command


def _kube_controller(client: Any) -> Any:
    from shoal.kube.controller import KubeController

    return KubeController(client)


def _cluster_observer(client: Any) -> Any:
    from shoal.kube.observer import ClusterObserver

    return ClusterObserver(client)


def _garbage_collector(client: Any) -> Any:
    from shoal.controllers.gc import GarbageCollector

    return GarbageCollector(client)


def _reschedule_controller(client: Any) -> Any:
    from shoal.controllers.reschedule import RescheduleTaskController

    return RescheduleTaskController(client)


CONTROLLERS: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("kube-controller", "Run the Kubernetes application controller alone.", _kube_controller),
    ("cluster-observer", "Run the cluster observer alone.", _cluster_observer),
    ("garbage-collector", "Run the garbage collector alone.", _garbage_collector),
    ("reschedule-controller", "Run the RescheduleTask controller alone.", _reschedule_controller),
]


def controllers(client_of: Callable[[str], Any], scheduler_config: Path | None = None) -> list[Any]:
    """Every controller, each on the client of its own identity (``client_of(component)``)."""
    from shoal.scheduler.config import SchedulerConfig
    from shoal.scheduler.scheduler import Scheduler

    cfg = SchedulerConfig.load(scheduler_config)
    return [Scheduler(client_of("scheduler"), cfg)] + [
        build(client_of(name)) for name, _, build in CONTROLLERS
    ]


def register(app: typer.Typer) -> None:
    app.command("api")(api)
    app.command("scheduler")(scheduler)
    for name, doc, build in CONTROLLERS:
        app.command(name)(_controller_command(name, doc, build))
    from shoal.cli.up import up

    app.command("up")(up)
