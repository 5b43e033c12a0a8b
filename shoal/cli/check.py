"""``shoal check``: the stored objects that the API's rules would now refuse, and why.

Rules on input grow stricter over time (a kubeconfig that must resolve, a
manifest Kubernetes would take); objects stored before still load, list and
delete, but their next update must pass. This sends each stored object back
as a dry-run update, so the API itself says what it would refuse, with the
version of the rules and the Kubernetes schemas it runs, and stores nothing.
Exit status 1 when an object is refused.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from shoal.cli.errors import CliError

CHECKED_IN_PARALLEL = 16


def check_command(
    ctx: typer.Context,
    kinds: Annotated[
        list[str] | None,
        typer.Option("--kind", "-k", help="Only these kinds (e.g. Cluster); default: every kind."),
    ] = None,
) -> None:
    """List the stored objects that the API would now refuse, each with the field and reason."""
    from rich.console import Console
    from rich.table import Table

    from shoal.cli.config import run
    from shoal.client.rest import NO_UPDATE_TITLE, ApiError, ShoalClient
    from shoal.client.wire import collection_path, item_path
    from shoal.model.registry import KINDS

    wanted = {k.lower() for k in kinds or ()}
    selected = [k for k in KINDS if not wanted or k.kind_name().lower() in wanted]
    if wanted and not selected:
        raise CliError(f"no kind named {', '.join(sorted(wanted))}")
    found: list[tuple[str, str, str, str]] = []
    counted = 0

    async def one(client: ShoalClient, kind: Any, obj: dict[str, Any], gate: Any) -> None:
        meta = obj["metadata"]
        path = item_path(kind, meta["name"], meta.get("namespace"))
        async with gate:
            try:
                await client.request("PUT", path, body=obj, params={"dry_run": "true"})
            except ApiError as error:
                if error.status == 400 and error.title == NO_UPDATE_TITLE:
                    return  # every check passed, and it changes nothing: a Krake kind's 400
                if error.status != 422:
                    raise
                place = f"{meta['namespace']}/{meta['name']}" if kind.namespaced else meta["name"]
                for item in error.problem.get("errors") or [{"field": "", "reason": error.detail}]:
                    found.append((kind.kind_name(), place, item["field"], item["reason"]))

    async def work(client: ShoalClient) -> None:
        nonlocal counted
        gate = asyncio.Semaphore(CHECKED_IN_PARALLEL)
        for kind in selected:
            listed = await client.request("GET", collection_path(kind))
            items = [o for o in listed["items"] if not o["metadata"].get("deleted")]
            counted += len(items)
            await asyncio.gather(*(one(client, kind, obj, gate) for obj in items))

    run(ctx, work)
    console = Console(soft_wrap=True)
    if not found:
        console.print(f"{counted} objects checked: the API accepts every one of them.")
        return
    table = Table("KIND", "NAME", "FIELD", "REASON", box=None, pad_edge=False)
    for row in sorted(found):
        table.add_row(*row)
    console.print(table)
    refused = len({(kind, name) for kind, name, _, _ in found})
    console.print(
        f"{counted} objects checked, {refused} refused by the current rules: "
        "fix them before their next update (shoal apply -f, or the kind's update command)."
    )
    raise typer.Exit(1)


def install(root: typer.Typer) -> None:
    root.command("check")(check_command)
