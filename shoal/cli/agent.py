"""``shoal agent``: run the cluster agent of one registered cluster and register it.

``--cluster NAME`` reads the cluster's kubeconfig through the API and writes
the agent's URL into the cluster's status, where the fleet scheduler finds
it; ``--kubeconfig FILE`` runs an agent on any cluster without the API.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer

from shoal.cli.errors import CliError


def agent(
    cluster: Annotated[str | None, typer.Option("--cluster", help="Registered cluster")] = None,
    namespace: Annotated[str, typer.Option("-n", "--namespace")] = "default",
    api_url: Annotated[str | None, typer.Option("--api", help="Shoal API URL")] = None,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Member cluster (no API needed)")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Agent YAML settings")] = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="0: any free port")] = 8090,
    advertise: Annotated[
        str | None, typer.Option("--advertise", help="URL registered (default: where it listens)")
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """Run the cluster agent of one cluster (fleet pods: sample and commit)."""
    from shoal.agent.config import AgentConfig
    from shoal.agent.server import load_kubeconfig, main

    if cluster is None and kubeconfig is None:
        raise CliError("give --cluster NAME (a registered cluster) or --kubeconfig FILE")
    if cluster is None:
        argv = ["--kubeconfig", str(kubeconfig), "--host", host, "--port", str(port),
                "--log-level", log_level]
        main(argv + (["--config", str(config)] if config else []))
        return
    from shoal.cli.config import credentials, resolve_api
    from shoal.system.process import configure_logging, run_until_signal

    configure_logging(log_level)
    settings = AgentConfig.from_file(config, cluster=cluster)
    url = resolve_api(api_url)
    found = credentials()

    async def run() -> None:
        from shoal.agent.register import keep_registered, set_agent_url
        from shoal.agent.server import start_agent
        from shoal.client.rest import ShoalClient
        from shoal.model.kubernetes import Cluster

        async with ShoalClient(url, token=found.token, ssl_context=found.ssl_context()) as client:
            stored = await client.get(Cluster, cluster, namespace)
            member = stored.spec.kubeconfig or (load_kubeconfig(str(kubeconfig))
                                                if kubeconfig else None)
            if member is None:
                raise CliError(f"cluster {namespace}/{cluster} has no kubeconfig yet")
            running = await start_agent(member, settings, host, port)
            public = advertise or running.url
            typer.echo(f"agent of cluster {namespace}/{cluster} on {running.url}")
            keeper = asyncio.create_task(keep_registered(client, cluster, namespace, public))
            try:
                await running.task
            finally:
                keeper.cancel()
                with contextlib.suppress(Exception):
                    await set_agent_url(client, cluster, namespace, "")
                await running.stop()

    run_until_signal(run)


def register(app: typer.Typer) -> None:
    app.command("agent")(agent)
