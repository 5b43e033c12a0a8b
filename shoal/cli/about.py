"""``shoal version`` and ``shoal describe KIND NAME``, at the top level as kubectl has them."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import typer

from shoal.cli.errors import CliError
from shoal.cli.names import DEFAULT_NAMESPACE, resolve


def version_command() -> None:
    """Print the version of the shoal command."""
    try:
        typer.echo(f"shoal {version('shoal')}")
    except PackageNotFoundError:
        typer.echo("shoal (not installed as a package)")


def describe_command(
    ctx: typer.Context,
    kind: str = typer.Argument(..., help="Kind: app, cluster (or their other names)."),
    name: str = typer.Argument(..., help="Name of the object."),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace."),
) -> None:
    """The describe page of an application or a cluster (shoal kube app|cluster describe)."""
    from shoal.cli.config import run
    from shoal.cli.describe import describe_app, describe_cluster

    entry = resolve(kind)
    pages = {"Application": describe_app, "Cluster": describe_cluster}
    page = pages.get(entry.kind)
    if page is None:
        raise CliError(
            f"{entry.kind} has no describe page (applications and clusters have one); "
            f"see it with: shoal get {kind} {name} -o yaml"
        )
    typer.echo("\n".join(run(ctx, lambda client: page(client, name, namespace))))


def install(root: typer.Typer) -> None:
    root.command("version")(version_command)
    root.command("describe")(describe_command)
