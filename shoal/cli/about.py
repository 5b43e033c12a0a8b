"""``shoal version`` and ``shoal describe KIND NAME``, at the top level as kubectl has them."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import typer

from shoal.cli import complete
from shoal.cli.errors import CliError
from shoal.cli.names import resolve
from shoal.cli.params import namespace_option
from shoal.model.catalog import BY_KIND

DESCRIBED = ("Application", "Cluster")


def version_command() -> None:
    """Print the version of the shoal command."""
    try:
        typer.echo(f"shoal {version('shoal')}")
    except PackageNotFoundError:
        typer.echo("shoal (not installed as a package)")


def _described_kinds(incomplete: str) -> list[str]:
    """The names of the kinds that have a describe page (app, cluster, ...)."""
    names = [n for kind in DESCRIBED for n in BY_KIND[("kubernetes", kind)].names]
    return [n for n in names if n.startswith(incomplete.lower())]


def _names(ctx: Any, incomplete: str) -> list[str]:  # typer's context: click's, vendored
    """The names of the objects of the kind given first (``shoal describe app <TAB>``)."""
    return complete.names_of_kind_argument(ctx, None, incomplete)


def describe_command(
    ctx: typer.Context,
    kind: str = typer.Argument(
        ..., help="Kind: app, cluster (or their other names).", autocompletion=_described_kinds
    ),
    name: str = typer.Argument(..., help="Name of the object.", autocompletion=_names),
    namespace: str = namespace_option(),
) -> None:
    """The describe page of an application or a cluster (shoal kube app|cluster describe)."""
    from shoal.cli.config import run
    from shoal.cli.describe import describe_app, describe_cluster

    entry = resolve(kind)
    pages = dict(zip(DESCRIBED, (describe_app, describe_cluster), strict=True))
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
