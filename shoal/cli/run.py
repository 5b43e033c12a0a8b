"""Process commands: ``shoal api``, ``shoal scheduler``, each controller alone, ``shoal up``.

Each reads its options and where the API, the store and the credentials are, then hands
over to the composition root, ``shoal.system``, which starts the component.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.cli.process_options import (
    ApiOption,
    Identity,
    LeaderElect,
    LeaseDuration,
    LogLevel,
    MetricsPort,
    StoreOption,
)
from shoal.system.components import CONTROLLERS, SCHEDULER


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
    kube_finalizer: Annotated[
        bool,
        typer.Option(
            "--kube-finalizer",
            help="Give each new application the kube controller's finalizer "
            "(shoal.kube/resources) when it is created, which spares the kube controller a "
            "write per application. For Shoal's kube controller (shoal up sets it); not "
            "under Krake's, which never removes it",
        ),
    ] = False,
) -> None:
    """Run the API server alone."""
    from shoal.cli.config import resolve_store
    from shoal.system.components import run_api

    store_url = resolve_store(store, Path("shoal.db"))
    run_api(store_url, host, port, config, log_level, kube_finalizer=kube_finalizer)


def _run_controller(
    factory: Callable[[Any], Any],
    api_url: str | None,
    **options: Any,
) -> None:
    """One controller alone against an API. It authenticates as itself: $SHOAL_TOKEN or
    $SHOAL_CERT/$SHOAL_KEY, else ``token``, ``cert``, ``key`` (and ``ca``) of the config file."""
    from shoal.cli.config import credentials, resolve_api
    from shoal.system.components import run_controller

    run_controller(factory, resolve_api(api_url), credentials, **options)


def scheduler(
    api_url: ApiOption = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Scheduler YAML configuration")
    ] = None,
    leader_elect: LeaderElect = False,
    lease_duration: LeaseDuration = 15.0,
    lease_name: Annotated[str, typer.Option("--lease-name", help="Lease to campaign for")] = (
        SCHEDULER
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
    from shoal.system import components

    if flavour not in components.FLAVOURS:
        raise typer.BadParameter("'shoal' or 'krake'", param_hint="--flavour")
    settings = SchedulerConfig.load(config)  # a wrong file fails before anything runs

    def build(client: Any) -> Any:
        return components.scheduler(client, settings, flavour=flavour, lease_name=lease_name)

    run = _controller_command(SCHEDULER, "", build)
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
    app.command(SCHEDULER)(scheduler)
    for component in CONTROLLERS:
        app.command(component.name)(
            _controller_command(component.name, component.doc, component.build)
        )
    from shoal.cli.up import up

    app.command("up")(up)
