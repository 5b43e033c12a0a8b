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

        start_http_server(metrics_port, addr="127.0.0.1")

    found = credentials()
    auth: dict[str, Any] = {"token": found.token, "ssl_context": found.ssl_context()}

    async def main() -> None:
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

    On an existing data directory it starts again where it stopped: the
    stored clusters (labels, metrics) and placements are kept, and the
    simulator comes back on its previous port so the clusters reconnect.
    """
    from shoal.api.auth import bootstrap
    from shoal.api.auth.roles import component_user
    from shoal.client.credentials import Credentials

    _logging(log_level, one_line=log_level.lower() != "debug")
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
        sim = agents = None
        try:
            await _sample_metrics(client)
            sim, restarted = await _start_fleet(client, data_dir, clusters, nodes)
            from shoal.agent.local import start_all  # one agent per cluster (fleet pods)

            kubeconfigs = {name: sim.kubeconfig(name) for name in sim.fleet.clusters}
            agents = await start_all(client_of("agent"), kubeconfigs)
            if demo:
                await _demo(client, [f"sim-{i + 1}" for i in range(clusters)], restarted)
            if exit_after_demo:
                return
            config = setup.write_client_config(server.url)
            console.print(
                f"\nCredentials: {config} (admin token, CA); the CLI reads it from this "
                f"directory, or anywhere with [bold]SHOAL_CONFIG={config}[/]"
            )
            shoal = _shoal_command()
            console.print(
                f"Try: [bold]SHOAL_API={server.url} {shoal} kube app list[/]   (Ctrl-C stops)"
            )
            if shoal != "shoal":
                console.print("     or put shoal on the PATH: [bold]source .venv/bin/activate[/]")
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if agents is not None:
                await agents.close()
            if sim is not None:
                await sim.stop()
            for each in clients:
                await each.close()
            await server.stop()

    _run_until_signal(main, quiet=True)


def _shoal_command() -> str:
    """``shoal`` when it is on the PATH, else the path of this one (``.venv/bin/shoal``)."""
    import shutil
    import sys

    here = Path(sys.executable).parent / "shoal"
    found = shutil.which("shoal")
    if found is not None and Path(found).resolve() == here.resolve():
        return "shoal"
    if here.exists():
        try:
            return str(here.relative_to(Path.cwd()))
        except ValueError:
            return str(here)
    return "shoal"


def _previous_port(data_dir: Path) -> int:
    """The simulator's port of the last run, so that stored kubeconfigs stay valid; else any."""
    from shoal.sim.cli import read_admin_url

    url = read_admin_url(data_dir)
    if url is None:
        return 0
    port = int(url.rsplit(":", 1)[1])
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the sim binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return 0
    return port


async def _start_fleet(client: Any, data_dir: Path, count: int, nodes: int) -> tuple[Any, bool]:
    """Start ``count`` simulated clusters and register those not registered yet.

    Returns the sim server and whether the clusters were registered before
    (a restart): their stored labels and metrics are kept, and shown.
    """
    import yaml

    from shoal.client.rest import NotFound
    from shoal.model.base import Metadata
    from shoal.model.kubernetes import Cluster, ClusterSpec, MetricRef
    from shoal.sim.cli import write_admin_url
    from shoal.sim.server import start_sim

    sim = await start_sim(host="127.0.0.1", port=_previous_port(data_dir), clusters=[])
    write_admin_url(data_dir, sim.url)
    locations = ["DE", "FR", "FI", "NL", "IT"]
    table = Table("cluster", "labels", "metrics", "kubeconfig", title="Simulated clusters")
    kube_dir = data_dir / "kubeconfigs"
    kube_dir.mkdir(parents=True, exist_ok=True)
    restarted = False
    for i in range(count):
        name = f"sim-{i + 1}"
        location = locations[i % len(locations)]
        sim.fleet.add_cluster(name, nodes=nodes, node_labels={"location": location})
        kubeconfig = sim.fleet.kubeconfig(name)
        (kube_dir / f"{name}.yaml").write_text(yaml.safe_dump(kubeconfig))
        metrics = [
            MetricRef(name="green_energy", weight=1.0),
            MetricRef(name=f"free_capacity_{i + 1}", weight=0.5),
        ]
        cluster = Cluster(
            metadata=Metadata(name=name, namespace="default", labels={"location": location}),
            spec=ClusterSpec(kubeconfig=kubeconfig, metrics=metrics),
        )
        try:
            stored = await client.get(Cluster, name, "default")
            restarted = True
            if stored.spec.kubeconfig != kubeconfig:
                stored.spec.kubeconfig = kubeconfig
                stored = await client.update(stored)
        except NotFound:
            stored = await client.create(cluster)
        labels = ", ".join(f"{k}={v}" for k, v in sorted(stored.metadata.labels.items()))
        table.add_row(
            name,
            labels or "-",
            ", ".join(m.name for m in stored.spec.metrics),
            str(kube_dir / f"{name}.yaml"),
        )
    console.print(table)
    console.print(f"[bold green]Simulator[/] admin API on {sim.url} (in {data_dir / 'sim.url'})")
    return sim, restarted


async def _wait_online(client: Any, names: list[str], restarted: bool, timeout: float) -> None:
    """Wait until the clusters are ONLINE, saying once that they are coming back or connecting."""
    from shoal.model.kubernetes import Cluster, ClusterState

    said = False
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        listed = await client.list(Cluster, "default")
        waiting = sorted(
            c.metadata.name
            for c in listed.items
            if c.metadata.name in names and c.status.state is not ClusterState.ONLINE
        )
        if not waiting or asyncio.get_running_loop().time() > deadline:
            if waiting:
                console.print(f"clusters not ONLINE yet: {', '.join(waiting)}")
            return
        if not said:
            what = "coming back" if restarted else "connecting"
            console.print(f"clusters {what}: {', '.join(waiting)} …")
            said = True
        await asyncio.sleep(0.1)


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


async def _demo(client: Any, clusters: list[str], restarted: bool) -> None:
    """Create a demo application (or find the stored one) and show where it is and why."""
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
    await _wait_online(client, clusters, restarted, timeout=20)
    try:
        await client.get(Application, "demo", "default")
        stored = " (stored)"
    except NotFound:
        await client.create(app)
        stored = ""
    for _ in range(400):
        current = await client.get(Application, "demo", "default")
        if current.status.scheduled_to is not None:
            break
        await asyncio.sleep(0.05)
    target = current.status.scheduled_to.name if current.status.scheduled_to else "nowhere yet"
    constraint = ", ".join(current.spec.constraints.cluster.labels) or "none"
    console.print(
        f"\nApplication [bold]demo[/] (constraint: {constraint}) → [bold cyan]{target}[/]{stored}"
    )
    # The stored explanation may predate the restart, and keeps the score terms of the
    # chosen cluster only; a dry run of the stored application says how things are now.
    body = current.model_dump(mode="json", include={"api", "kind", "metadata", "spec"})
    detail = await client.request("POST", "/scheduling/namespaces/default/dryrun", body=body)
    console.print(f"  {detail.get('summary', '')}")
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
