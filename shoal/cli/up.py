"""``shoal up``: the embedded all-in-one, started again where it stopped.

The API on a SQLite file, every controller, a small ``shoal sim`` fleet
registered as clusters, and sample metrics from a static provider, so a
newcomer sees placement happen at once. On an existing data directory the
stored clusters and placements are kept and shown as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shoal.cli.process_options import StoreOption


def up(
    port: Annotated[int, typer.Option("--port", help="API port")] = 8080,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where the SQLite file and kubeconfigs go")
    ] = Path("data"),
    store: StoreOption = None,
    clusters: Annotated[int, typer.Option("--clusters", help="Simulated clusters")] = 3,
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes per simulated cluster")] = 5,
    pull_clusters: Annotated[
        int,
        typer.Option(
            "--pull-clusters", min=0,
            help="More simulated clusters, joined in pull mode, an agent process each "
            "(needs --tls)",
        ),
    ] = 0,
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
    from shoal.cli.config import resolve_store
    from shoal.system.demo import previous_port
    from shoal.system.installation import Installation, private_data_dir

    if pull_clusters and not tls:
        raise typer.BadParameter("pull clusters pin the API's CA: add --tls",
                                 param_hint="--pull-clusters")  # fmt: skip
    if pull_clusters and single_process:
        raise typer.BadParameter("each pull cluster's agent is a process: not with "
                                 "--single-process", param_hint="--pull-clusters")  # fmt: skip
    private_data_dir(data_dir)
    installation = Installation(
        data_dir=data_dir, store_url=resolve_store(store, data_dir / "shoal.db"), port=port,
        tls=tls, clusters=clusters, nodes=nodes, demo=demo, exit_after_demo=exit_after_demo,
        log_level=log_level, scheduler_config=scheduler_config, pull_clusters=pull_clusters,
    )  # fmt: skip
    if single_process:
        from shoal.system.single import run_single_process

        run_single_process(installation)
        return
    from shoal.system.processes import run_processes

    first_metrics_port = port + 1 if metrics_port is None else metrics_port
    run_processes(
        installation, sim_port=previous_port(data_dir), metrics_port=first_metrics_port
    )
