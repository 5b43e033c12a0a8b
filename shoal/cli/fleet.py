"""``shoal fleet pod explain``: what only fleet pods have, on the generated group."""

from __future__ import annotations

from typing import Any

import typer

from shoal.cli.commands import KIND_GROUPS
from shoal.cli.config import run
from shoal.cli.names import DEFAULT_NAMESPACE
from shoal.cli.output import Output, print_data
from shoal.cli.params import output_option
from shoal.model.pods import Pod

pods = KIND_GROUPS[Pod]


def _show(status: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    where = f"{status['cluster']}/{status['node']}" if status.get("node") else "-"
    console.print(f"[bold]{title}[/]: {status['phase']} on {where} after "
                  f"{status['attempts']} attempt(s)")
    if status.get("reason"):
        console.print(f"  {status['reason']}")
    timings = status.get("timings") or {}
    console.print("  timings: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in timings.items()))
    explanation = status.get("explanation") or {}
    table = Table("PHASE", "WHAT HAPPENED")
    for phase in ("sampling", "decision", "commit"):
        found = explanation.get(phase)
        if found:
            table.add_row(phase, found.get("summary", ""))
    console.print(table)
    clusters = (explanation.get("sampling") or {}).get("clusters") or {}
    if clusters:
        per = Table("CLUSTER", "ANSWER", "ELIGIBLE/EXAMINED", "REJECTED")
        for name, item in sorted(clusters.items()):
            rejected = ", ".join(f"{n} {r}" for r, n in (item.get("rejected") or {}).items())
            per.add_row(name, item.get("answer", ""),
                        f"{item.get('eligible', 0)}/{item.get('examined', 0)}", rejected or "-")
        console.print(per)


@pods.command("explain")
def pod_explain(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Pod name."),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace."),
    output: Output = output_option(),
) -> None:
    """Why the pod is where it is (or is not): each phase of its last attempt."""

    async def work(client: Any) -> dict[str, Any]:
        found = await client.get(Pod, name, namespace)
        status: dict[str, Any] = found.status.model_dump(mode="json")
        return status

    status = run(ctx, work)
    if output is not Output.table:
        print_data(status, output)
        return
    _show(status, f"{namespace}/{name}")
