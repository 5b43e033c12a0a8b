"""``shoal up``: the embedded all-in-one, started again where it stopped.

The API on a SQLite file, every controller, a small ``shoal sim`` fleet
registered as clusters, and sample metrics from a static provider, so a
newcomer sees placement happen at once. On an existing data directory the
stored clusters and placements are kept and shown as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Annotated

import typer

from shoal.cli.components import (
    StoreOption,
    configure_logging,
    console,
    controllers,
    resolve_store,
    run_until_signal,
)
from shoal.cli.up_steps import (
    banner,
    create_demo,
    previous_port,
    sample_metrics,
    start_sim_fleet,
)


def private_data_dir(data_dir: Path) -> None:
    """The data directory holds the store, logs, kubeconfigs and keys: only this user may
    read it. Everything ``shoal up`` and its processes create is 0600 (directories 0700);
    what an earlier start left is made so too."""
    os.umask(0o077)
    data_dir.mkdir(parents=True, exist_ok=True)
    for path in (data_dir, *data_dir.rglob("*")):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o777
        private = mode & 0o700
        if mode != private:
            path.chmod(private)


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
    scheduler_config: Annotated[
        Path | None, typer.Option("--scheduler-config", help="Scheduler YAML configuration")
    ] = None,
    single_process: Annotated[
        bool,
        typer.Option(
            "--single-process",
            help="Every component on one event loop in this process (for debugging)",
        ),
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            help="First port of the scheduler's and each controller's /metrics, one each "
            "(default: the API port + 1; 0: none)",
        ),
    ] = None,
) -> None:
    """Start Shoal with embedded defaults: API, every controller, a sim fleet, sample metrics.

    Secure by default: its own CA, tokens and secrets key in --data-dir/security,
    RBAC, no anonymous access; each controller has its own identity.

    Each component runs in a process of its own (API, simulator, scheduler, each
    controller, the cluster agents), restarted if it dies; logs in --data-dir/logs.

    On an existing data directory it starts again where it stopped: the
    stored clusters (labels, metrics) and placements are kept, and the
    simulator comes back on its previous port so the clusters reconnect.
    """
    from shoal.api.auth import bootstrap
    from shoal.api.auth.roles import component_user
    from shoal.client.credentials import Credentials

    private_data_dir(data_dir)
    store_url = resolve_store(store, data_dir / "shoal.db")
    if not single_process:
        from shoal.cli.up_processes import run_processes

        run_processes(
            data_dir=data_dir, store_url=store_url, port=port, tls=tls, clusters=clusters,
            nodes=nodes, demo=demo, exit_after_demo=exit_after_demo, log_level=log_level,
            scheduler_config=scheduler_config, sim_port=previous_port(data_dir),
            metrics_port=port + 1 if metrics_port is None else metrics_port,
        )  # fmt: skip
        return
    configure_logging(log_level, one_line=log_level.lower() != "debug")
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
        running = controllers(client_of, scheduler_config)
        tasks = [asyncio.create_task(c.run()) for c in running]
        names = ", ".join(type(c).__name__ for c in running)
        console.print(f"[bold green]Controllers[/]: {names}")
        sim = agents = None
        try:
            await sample_metrics(client)
            sim, restarted = await start_sim_fleet(client, data_dir, clusters, nodes)
            from shoal.agent.local import start_all  # one agent per cluster (fleet pods)

            kubeconfigs = {name: sim.kubeconfig(name) for name in sim.fleet.clusters}
            scheduler_token = setup.tokens[component_user("scheduler")]
            agents = await start_all(
                client_of("agent"), kubeconfigs, callers=[scheduler_token], keep=True
            )
            if demo:
                await create_demo(client, [f"sim-{i + 1}" for i in range(clusters)], restarted)
            if exit_after_demo:
                return
            banner(setup, server.url, data_dir)
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

    run_until_signal(main, quiet=True)


