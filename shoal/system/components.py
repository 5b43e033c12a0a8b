"""The components of a Shoal installation, described once, and how each process runs one.

``CONTROLLERS`` names every controller with how each is built on a client, and
``scheduler`` builds the scheduler with its configuration. ``shoal scheduler`` and each
controller command, ``shoal up`` in one process or one process per component, and the
test and bench launcher (``shoal.testing.launch``) all start them from here, with
``run_controller`` and ``run_api``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoal.system.process import configure_logging, console, run_until_signal


@dataclass(frozen=True)
class Component:
    """One controller process: its command name, what it does, how it is built on a client."""

    name: str
    doc: str
    build: Callable[[Any], Any]


def _kube_controller(client: Any) -> Any:
    from shoal.kube.controller import KubeController

    return KubeController(client)


def _cluster_observer(client: Any) -> Any:
    from shoal.observer.controller import ClusterObserver

    return ClusterObserver(client)


def _garbage_collector(client: Any) -> Any:
    from shoal.gc.controller import GarbageCollector

    return GarbageCollector(client)


def _reschedule_controller(client: Any) -> Any:
    from shoal.reschedule.controller import RescheduleTaskController

    return RescheduleTaskController(client)


def _infrastructure_controller(client: Any) -> Any:
    from shoal.infrastructure.controller import InfrastructureController

    return InfrastructureController(client)


SCHEDULER = "scheduler"
"""The scheduler's command and identity; it is built with its configuration (``scheduler``)."""

CONTROLLERS: tuple[Component, ...] = (
    Component("kube-controller", "Run the Kubernetes application controller alone.",
              _kube_controller),
    Component("cluster-observer", "Run the cluster observer alone.", _cluster_observer),
    Component("garbage-collector", "Run the garbage collector alone.", _garbage_collector),
    Component("reschedule-controller", "Run the RescheduleTask controller alone.",
              _reschedule_controller),
    Component("infrastructure-controller",
              "Run the infrastructure controller alone (clusters built on clouds).",
              _infrastructure_controller),
)  # fmt: skip

NAMES: tuple[str, ...] = (SCHEDULER, *(c.name for c in CONTROLLERS))
"""Every controller process, the scheduler first: the order they start and get ports in."""


FLAVOURS = ("shoal", "krake")
"""The APIs a scheduler drives: Shoal's, or a Krake 1.0.1 API server."""


def scheduler(
    client: Any, config: Any = None, *, flavour: str = "shoal", lease_name: str = SCHEDULER
) -> Any:
    """The scheduler on ``client`` with ``config`` (a SchedulerConfig; None: the defaults),
    campaigning for ``lease_name``. On a Krake API (``flavour`` ``krake``) it goes through
    ``KrakeApi`` and publishes no configuration (Krake stores no SchedulerConfiguration)."""
    from shoal.scheduler.scheduler import Scheduler

    if flavour not in FLAVOURS:
        raise ValueError(f"flavour: {flavour!r} is not one of {', '.join(FLAVOURS)}")
    if flavour == "krake":
        from shoal.client.krake import KrakeApi

        return Scheduler(KrakeApi.like(client), config, publish=False, lease_name=lease_name)
    return Scheduler(client, config, lease_name=lease_name)


def controllers(client_of: Callable[[str], Any], config_path: Path | None = None) -> list[Any]:
    """Every controller, each on the client of its own identity (``client_of(component)``)."""
    from shoal.model.scheduler_config import SchedulerConfig

    return [scheduler(client_of(SCHEDULER), SchedulerConfig.load(config_path))] + [
        c.build(client_of(c.name)) for c in CONTROLLERS
    ]


def run_api(
    store_url: str,
    host: str,
    port: int,
    config: Path | None,
    log_level: str,
    *,
    kube_finalizer: bool = False,
) -> None:
    """The API server alone, until a signal, secured as its security configuration
    ``config`` says (None: open)."""
    from shoal.api.auth.config import load
    from shoal.api.server import start_api

    security = load(config) if config is not None else None  # a wrong file fails first
    configure_logging(log_level)

    async def main() -> None:
        server = await start_api(
            store_url, host, port, log_level="warning", security=security,
            kube_finalizer=kube_finalizer,
        )  # fmt: skip
        console.print(f"Shoal API listening on [bold]{server.url}[/] (store {store_url})")
        try:
            await server.task
        finally:
            await server.stop()

    run_until_signal(main)


def run_controller(
    factory: Callable[[Any], Any],
    url: str,
    credentials: Callable[[], Any],
    *,
    leader_elect: bool,
    lease_duration: float,
    lease_name: str,
    identity: str | None,
    metrics_port: int,
    log_level: str,
) -> None:
    """Run one controller alone against an API, optionally only while it holds a lease.

    It authenticates as itself with ``credentials()`` (a ``Credentials``), read once the
    signal handlers are in place, so that a SIGTERM at start-up stops cleanly.
    """
    from shoal.client.rest import ShoalClient

    configure_logging(log_level)
    if metrics_port:
        from shoal.controllers.prometheus import TOKEN_SETTING, serve_metrics

        # Loopback unless an operator says otherwise, and for the scrape token when one is
        # set: the metrics name namespaces and clusters.
        host = os.environ.get("SHOAL_METRICS_HOST", "127.0.0.1")
        serve_metrics(metrics_port, host, os.environ.get(TOKEN_SETTING))

    async def main() -> None:
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
