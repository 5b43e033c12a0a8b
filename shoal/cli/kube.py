"""``shoal kube app explain|dryrun|retry``: what only applications have, on the generated group."""

from __future__ import annotations

from typing import Any

import typer

from shoal.cli.commands import KIND_GROUPS, apply_flags, flag_param, read_flags
from shoal.cli.config import run
from shoal.cli.describe import chosen_text
from shoal.cli.errors import CliError
from shoal.cli.inputs import read_mappings
from shoal.cli.kinds import APPLICATION, CLUSTER_CONSTRAINTS, MANIFEST
from shoal.cli.output import Output, print_data
from shoal.cli.params import (
    CTX,
    command,
    name_argument,
    names_argument,
    namespace,
    namespace_option,
    output,
    output_option,
    param,
)
from shoal.cli.verbs import new_object
from shoal.model.application_status import staleness
from shoal.model.catalog import BY_KIND
from shoal.model.kubernetes import Application, Cluster

applications = KIND_GROUPS[Application]
NamespaceOption = namespace_option()
APPLICATION_ENTRY = BY_KIND[("kubernetes", "Application")]

# explanations -------------------------------------------------------------------


def _show_explanation(explanation: dict[str, Any], output: Output, title: str) -> None:
    """A scheduling explanation: summary, ranking with score terms, rejections."""
    if output is not Output.table:
        print_data(explanation, output)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{title}[/]: {explanation.get('summary', 'no attempt yet')}")
    if explanation.get("time"):
        console.print(f"decided at {explanation['time']}")
    if explanation.get("configuration"):
        console.print(f"configuration: {explanation['configuration']}")
    for change in explanation.get("stale") or []:
        console.print(f"[bold yellow]stale[/]: {change}")
    chosen = chosen_text(explanation)
    if chosen:
        console.print(f"chosen: [bold cyan]{chosen}[/]")
    ranking = Table("CLUSTER", "SCORE", "METRICS (value, normalised × weight)", "STICKINESS")
    for entry in explanation.get("ranking", []):
        metrics = ", ".join(
            f"{m['name']}={m['value']:g} ({m['normalised']:.3f} × {m['weight']:g})"
            for m in entry.get("metrics", [])
        )
        if entry.get("failing_metrics"):
            metrics += " failing: " + ", ".join(
                f"{k} {v}" for k, v in entry["failing_metrics"].items()
            )
        sticky = entry.get("stickiness")
        ranking.add_row(
            entry["cluster"],
            f"{entry['score']:.4f}",
            metrics or "-",
            f"1.0 × {sticky['weight']:g}" if sticky else "",
        )
    console.print(ranking)
    placements = explanation.get("placements") or []
    if placements:  # several clusters: each one's share, and what it was computed from
        shares = Table("CLUSTER", "SHARE", "SCORE", "ROOM", "WEIGHT", "SPREAD", "GROUP")
        for entry in placements:
            share = entry.get("replicas")
            shares.add_row(
                str(entry.get("cluster")),
                "all" if share is None else str(share),
                f"{entry.get('score', 0):.4f}",
                "?" if entry.get("room") is None else str(entry["room"]),
                f"{entry.get('weight', 0):g}",
                str(entry.get("spread") or "-"),
                str(entry.get("group", 0)) + (" (kept)" if entry.get("kept") else ""),
            )
        console.print(shares)
    rejected = explanation.get("rejected", [])
    if rejected:
        table = Table("REASON", "COUNT", "CLUSTERS")
        for item in rejected:
            names = ", ".join(item.get("clusters", []))
            more = item["count"] - len(item.get("clusters", []))
            table.add_row(
                item["reason"], str(item["count"]), names + (f" (+{more})" if more > 0 else "")
            )
        console.print(table)


@applications.command("explain")
def app_explain(
    ctx: typer.Context,
    name: str = names_argument(APPLICATION_ENTRY, "Application name."),
    namespace: str = NamespaceOption,
    output: Output = output_option(),
) -> None:
    """Why the application is where it is: the scheduler's last decision, when it was made,
    and "stale" with what changed when a cluster it looked at has changed since."""

    async def work(client: Any) -> dict[str, Any]:
        found = await client.get(Application, name, namespace)
        explanation: dict[str, Any] = dict(found.status.scheduling or {})
        if found.status.reason is not None:
            explanation.setdefault("reason", found.status.reason.model_dump(mode="json"))
        if explanation.get("clusters"):
            clusters = (await client.list(Cluster, namespace)).items
            explanation["stale"] = staleness(explanation, clusters)
        return explanation

    _show_explanation(run(ctx, work), output, f"{namespace}/{name}")


def _dryrun(
    ctx: typer.Context,
    application: str | None,
    file: str | None,
    name: str | None,
    namespace: str,
    output: Output,
    **values: Any,
) -> None:
    """A dry run of the stored application NAME, or of -f FILE; -L/-M/-R replace constraints."""
    given = read_flags(CLUSTER_CONSTRAINTS, values)
    if file is None and application is None:
        raise CliError("give the NAME of an application, or -f FILE (an Application or a manifest)")
    data: dict[str, Any] | None = None
    if file is not None:
        docs = read_mappings(file)
        if len(docs) == 1 and docs[0].get("kind") == "Application":
            data = docs[0]
            data.setdefault("metadata", {}).setdefault("name", application or name or "dryrun")
        else:
            data = {**new_object(Application, application or name or "dryrun", namespace, {})}
            data["spec"] = {}
            given = read_flags((MANIFEST,), {"file": file}) + given
        apply_flags(APPLICATION, data, given)

    async def work(client: Any) -> dict[str, Any]:
        body = data
        if body is None:
            stored = await client.get(Application, application, namespace)
            body = stored.model_dump(mode="json", include={"api", "kind", "metadata", "spec"})
            apply_flags(APPLICATION, body, given)
        path = f"/scheduling/namespaces/{namespace}/dryrun"
        result: dict[str, Any] = await client.request("POST", path, body=body)
        return result

    title = f"dry run of {application}" if application else "dry run"
    _show_explanation(run(ctx, work), output, title)


_CREATE = APPLICATION.verbs[0]
_DRYRUN_FILE = "Application (YAML/JSON object) or a manifest with -L/-M/-R; without it, NAME's."
_DRYRUN_NAME = "An existing application (what-if with -L/-M/-R), or the name for -f."
applications.command(
    "dryrun", help="Where would this application be placed now, and why? Binds nothing."
)(
    command(
        [
            CTX,
            param("application", str | None, typer.Argument(None, help=_DRYRUN_NAME)),
            param("file", str | None, typer.Option(None, "-f", "--file", help=_DRYRUN_FILE)),
            param("name", str | None, typer.Option(None, "--name", hidden=True)),
            namespace(),
            *(flag_param(flag, _CREATE) for flag in CLUSTER_CONSTRAINTS),
            output(),
        ],
        _dryrun,
    )
)


def _retry(ctx: typer.Context, name: str, namespace: str, output: Output) -> None:
    """Try a FAILED or waiting (PENDING, nothing fits yet) application again at once.

    Its failure counts start again; a waiting one is tried now, not at its next retry.
    """

    async def work(client: Any) -> dict[str, Any]:
        path = f"/kubernetes/namespaces/{namespace}/applications/{name}/retry"
        result: dict[str, Any] = await client.request("PUT", path)
        return result

    app = run(ctx, work)
    if output is not Output.table:
        print_data(app, output)
        return
    typer.echo(f"Application {namespace}/{name}: retrying ({app['status']['state']})")


applications.command("retry", help=_retry.__doc__)(
    command(
        [
            CTX,
            name_argument(APPLICATION_ENTRY, "Application name."),
            namespace(),
            output(),
        ],
        _retry,
    )
)
