"""``shoal agent``: run the cluster agent of one registered cluster and register it.

``--cluster NAME`` reads the cluster's kubeconfig through the API and writes
the agent's URL into the cluster's status, where the fleet scheduler finds
it; ``--kubeconfig FILE`` runs an agent on any cluster without the API.
"""

from __future__ import annotations

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
    from shoal.system.agent import NoKubeconfig, run_agent_alone, run_registered_agent, settings_of

    if cluster is None and kubeconfig is None:
        raise CliError("give --cluster NAME (a registered cluster) or --kubeconfig FILE")
    if cluster is None:
        run_agent_alone(kubeconfig, settings_of(config), host, port, log_level)
        return
    from shoal.cli.config import credentials, resolve_api

    settings = settings_of(config, cluster)
    try:
        run_registered_agent(
            resolve_api(api_url), credentials, cluster, namespace, settings,
            kubeconfig=kubeconfig, host=host, port=port, advertise=advertise,
            log_level=log_level,
        )  # fmt: skip
    except NoKubeconfig as error:
        raise CliError(str(error)) from None


def register(app: typer.Typer) -> None:
    app.command("agent")(agent)
