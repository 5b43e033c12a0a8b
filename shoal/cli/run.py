"""Process commands: ``shoal api``, ``shoal scheduler``, each controller alone, ``shoal up``.

``shoal up`` (the embedded all-in-one) is in ``shoal.cli.up``; what every process shares
(the components, the store URL, logging, running until a signal) is in
``shoal.cli.components``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.cli.components import (
    CONTROLLERS,
    StoreOption,
    configure_logging,
    console,
    resolve_store,
    run_until_signal,
)

ApiOption = Annotated[
    str | None, typer.Option("--api", help="URL of the Shoal API (default: $SHOAL_API)")
]
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

    configure_logging(log_level)
    store_url = resolve_store(store, Path("shoal.db"))
    security = load(config) if config is not None else None

    async def main() -> None:
        server = await start_api(store_url, host, port, log_level="warning", security=security)
        console.print(f"Shoal API listening on [bold]{server.url}[/] (store {store_url})")
        try:
            await server.task
        finally:
            await server.stop()

    run_until_signal(main)


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

    configure_logging(log_level)
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

    run_until_signal(main)


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
    from shoal.model.scheduler_config import SchedulerConfig
    from shoal.scheduler.scheduler import Scheduler

    if flavour not in ("shoal", "krake"):
        raise typer.BadParameter("'shoal' or 'krake'", param_hint="--flavour")
    cfg = SchedulerConfig.load(config)

    def build(client: Any) -> Scheduler:
        if flavour == "krake":  # a Krake API stores no SchedulerConfiguration
            from shoal.scheduler.krake import KrakeApi

            return Scheduler(KrakeApi.like(client), cfg, publish_as=None)
        return Scheduler(client, cfg, publish_as=lease_name)

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


def register(app: typer.Typer) -> None:
    app.command("api")(api)
    app.command("scheduler")(scheduler)
    for name, doc, build in CONTROLLERS:
        app.command(name)(_controller_command(name, doc, build))
    from shoal.cli.up import up

    app.command("up")(up)
