"""Process commands: ``shoal api``, ``shoal scheduler``, ``shoal up``.

``shoal up`` is the embedded all-in-one: the API on a SQLite file, every
controller, a small ``shoal sim`` fleet registered as clusters, and sample
metrics from a static provider, so a newcomer sees placement happen at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import uvloop
from rich.console import Console
from rich.table import Table

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


def _logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _run_until_signal(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main`` on uvloop until it returns or SIGINT/SIGTERM arrives, then clean up.

    uvloop (with httptools, which uvicorn picks up by itself) serves about 25%
    more API requests per second than asyncio's loop and h11.
    """

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

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
    """Run one controller alone against an API, optionally only while it holds a lease."""
    from shoal.cli.config import resolve_api
    from shoal.client.rest import ShoalClient

    _logging(log_level)
    url = resolve_api(api_url)
    if metrics_port:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr="127.0.0.1")

    async def main() -> None:
        async with ShoalClient(url) as client:
            if not leader_elect:
                await factory(client).run()
                return
            from shoal.controllers.elected import run_elected

            # The elector's own connections: renewals never queue behind the controller's.
            async with ShoalClient(url, timeout=lease_duration / 3) as lease_client:
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
) -> None:
    """Run the scheduler alone against an API."""
    from shoal.scheduler.config import SchedulerConfig
    from shoal.scheduler.scheduler import Scheduler

    cfg = SchedulerConfig.load(config)
    run = _controller_command("scheduler", "", lambda client: Scheduler(client, cfg))
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


def controllers(client_of: Callable[[str], Any]) -> list[Any]:
    """Every controller, each on the client of its own identity (``client_of(component)``)."""
    from shoal.scheduler.scheduler import Scheduler

    return [Scheduler(client_of("scheduler"))] + [
        build(client_of(name)) for name, _, build in CONTROLLERS
    ]


def up(
    port: Annotated[int, typer.Option("--port", help="API port")] = 8080,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where the SQLite file and kubeconfigs go")
    ] = Path("data"),
    store: StoreOption = None,
    clusters: Annotated[int, typer.Option("--clusters", help="Simulated clusters")] = 3,
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes per simulated cluster")] = 5,
    demo: Annotated[
        bool, typer.Option("--demo/--no-demo", help="Create a demo application")
    ] = True,
    exit_after_demo: Annotated[
        bool, typer.Option("--exit-after-demo", hidden=True, help="Stop once the demo is placed")
    ] = False,
    log_level: Annotated[str, typer.Option("--log-level")] = "warning",
    tls: Annotated[
        bool, typer.Option("--tls/--no-tls", help="Serve HTTPS with the CA made in --data-dir")
    ] = False,
) -> None:
    """Start Shoal with embedded defaults: API, every controller, a sim fleet, sample metrics.

    Secure by default: its own CA, tokens and secrets key in --data-dir/security,
    RBAC, no anonymous access; each controller has its own identity.
    """
    from shoal.api.auth import bootstrap
    from shoal.api.auth.roles import component_user
    from shoal.client.credentials import Credentials

    _logging(log_level)
    data_dir.mkdir(parents=True, exist_ok=True)
    store_url = resolve_store(store, data_dir / "shoal.db")
    setup = bootstrap.ensure(data_dir, tls=tls)

    async def main() -> None:
        from shoal.api.server import start_api
        from shoal.client.rest import ShoalClient

        server = await start_api(store_url, "127.0.0.1", port, security=setup.security)
        console.print(f"[bold green]Shoal API[/] on {server.url}  (store {store_url})")
        trust = Credentials(ca=str(setup.ca)).ssl_context() if tls else None
        clients: list[ShoalClient] = []

        def client_of(user: str) -> ShoalClient:
            token = setup.tokens[user if user == bootstrap.ADMIN else component_user(user)]
            clients.append(ShoalClient(server.url, token=token, ssl_context=trust))
            return clients[-1]

        client = client_of(bootstrap.ADMIN)
        running = controllers(client_of)
        tasks = [asyncio.create_task(c.run()) for c in running]
        names = ", ".join(type(c).__name__ for c in running)
        console.print(f"[bold green]Controllers[/]: {names}")
        sim = None
        try:
            await _sample_metrics(client)
            sim = await _start_fleet(client, data_dir, clusters, nodes)
            if demo:
                await _demo(client)
            if exit_after_demo:
                return
            config = setup.write_client_config(server.url)
            console.print(
                f"\nCredentials: {config} (admin token, CA); the CLI reads it from this "
                f"directory, or anywhere with [bold]SHOAL_CONFIG={config}[/]"
            )
            console.print(
                f"Try: [bold]SHOAL_API={server.url} shoal kube app list[/]   (Ctrl-C stops)"
            )
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if sim is not None:
                await sim.stop()
            for each in clients:
                await each.close()
            await server.stop()

    _run_until_signal(main)


async def _start_fleet(client: Any, data_dir: Path, count: int, nodes: int) -> Any:
    """Start ``count`` simulated clusters and register those not registered yet."""
    from shoal.client.rest import NotFound
    from shoal.model.base import Metadata
    from shoal.model.kubernetes import Cluster, ClusterSpec, MetricRef
    from shoal.sim.server import start_sim

    sim = await start_sim(host="127.0.0.1", port=0, clusters=[])
    locations = ["DE", "FR", "FI", "NL", "IT"]
    table = Table("cluster", "location", "metrics", "kubeconfig", title="Simulated clusters")
    kube_dir = data_dir / "kubeconfigs"
    kube_dir.mkdir(parents=True, exist_ok=True)
    import yaml

    for i in range(count):
        name = f"sim-{i + 1}"
        sim.fleet.add_cluster(name, nodes=nodes, node_labels={"location": locations[i % 5]})
        kubeconfig = sim.fleet.kubeconfig(name)
        (kube_dir / f"{name}.yaml").write_text(yaml.safe_dump(kubeconfig))
        location = locations[i % len(locations)]
        metrics = [
            MetricRef(name="green_energy", weight=1.0),
            MetricRef(name=f"free_capacity_{i + 1}", weight=0.5),
        ]
        cluster = Cluster(
            metadata=Metadata(name=name, namespace="default", labels={"location": location}),
            spec=ClusterSpec(kubeconfig=kubeconfig, metrics=metrics),
        )
        try:
            existing = await client.get(Cluster, name, "default")
            existing.spec.kubeconfig = kubeconfig
            await client.update(existing)
        except NotFound:
            await client.create(cluster)
        table.add_row(
            name, location, ", ".join(m.name for m in metrics), str(kube_dir / f"{name}.yaml")
        )
    console.print(table)
    return sim


async def _sample_metrics(client: Any) -> None:
    """A static provider: the share of green energy, and free capacity per cluster.

    Higher is better for both: seed 004's score prefers high normalised values.
    """
    from shoal.client.rest import ApiError
    from shoal.model.base import Metadata
    from shoal.model.core import (
        GlobalMetric,
        GlobalMetricsProvider,
        MetricProviderRef,
        MetricSpec,
        MetricsProviderSpec,
        StaticSpec,
    )

    values = {"green_energy": 0.6}
    for i in range(1, 11):
        values[f"free_capacity_{i}"] = round((0.37 * i) % 1, 2)
    objects: list[Any] = [
        GlobalMetricsProvider(
            metadata=Metadata(name="sample"),
            spec=MetricsProviderSpec(type="static", static=StaticSpec(metrics=values)),
        )
    ]
    for name in values:
        objects.append(
            GlobalMetric(
                metadata=Metadata(name=name),
                spec=MetricSpec(
                    min=0, max=1, provider=MetricProviderRef(name="sample", metric=name)
                ),
            )
        )
    for obj in objects:
        with contextlib.suppress(ApiError):
            await client.create(obj)


async def _demo(client: Any) -> None:
    """Create a demo application and show where it lands and why."""
    from shoal.client.rest import NotFound
    from shoal.model.base import Metadata
    from shoal.model.kubernetes import (
        Application,
        ApplicationSpec,
        ClusterConstraints,
        Constraints,
    )

    manifest = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "echo"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "echo"}},
                "template": {
                    "metadata": {"labels": {"app": "echo"}},
                    "spec": {"containers": [{"name": "echo", "image": "hashicorp/http-echo"}]},
                },
            },
        }
    ]
    app = Application(
        metadata=Metadata(name="demo", namespace="default"),
        spec=ApplicationSpec(
            manifest=manifest,
            constraints=Constraints(cluster=ClusterConstraints(labels=["location in (DE, FR)"])),
        ),
    )
    # Let the metric caches fetch the sample values first: wait until a dry run scores them.
    body = app.model_dump(mode="json")
    for _ in range(100):
        result = await client.request("POST", "/scheduling/namespaces/default/dryrun", body=body)
        ranking = result.get("ranking", [])
        if ranking and all(entry.get("metrics") for entry in ranking):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    try:
        await client.get(Application, "demo", "default")
    except NotFound:
        await client.create(app)
    for _ in range(200):
        current = await client.get(Application, "demo", "default")
        if current.status.scheduled_to is not None:
            break
        await asyncio.sleep(0.05)
    explanation = current.status.scheduling or {}
    target = current.status.scheduled_to.name if current.status.scheduled_to else "nowhere yet"
    console.print(
        f"\nApplication [bold]demo[/] (constraint: location in (DE, FR)) → [bold cyan]{target}[/]"
    )
    console.print(f"  {explanation.get('summary', '')}")
    # The stored explanation keeps score terms of the chosen cluster only; a dry run has all.
    detail = await client.request("POST", "/scheduling/namespaces/default/dryrun", body=body)
    table = Table("cluster", "score", "metrics", title="Ranking (shoal kube app dryrun)")
    for entry in detail.get("ranking", []):
        metrics = ", ".join(
            f"{m['name']}={m['value']:g} (w {m['weight']:g})" for m in entry.get("metrics", [])
        )
        table.add_row(entry["cluster"], f"{entry['score']:.3f}", metrics)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("api")(api)
    app.command("scheduler")(scheduler)
    for name, doc, build in CONTROLLERS:
        app.command(name)(_controller_command(name, doc, build))
    app.command("up")(up)
