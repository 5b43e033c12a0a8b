"""``shoal reschedule``: ask for rescheduling on demand (a RescheduleTask).

    shoal reschedule app web api -n shop --wait
    shoal reschedule --selector tier=web -n shop
    shoal reschedule --cluster backup-1 --wait
    shoal reschedule results TASK

Each command creates one task; ``--wait`` follows it with a progress bar and
prints the result of every target (exit status 1 when one failed).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shoal.cli.config import run
from shoal.cli.errors import CliError
from shoal.cli.output import Output, print_objects
from shoal.cli.params import (
    CTX,
    ShoalGroup,
    command,
    names_argument,
    namespace,
    output,
    output_option,
    param,
)
from shoal.cli.verbs import build
from shoal.client.rest import Gone, NotFound, ShoalClient
from shoal.machinery.listwatch import ListWatch, stop_on_failure
from shoal.model.catalog import BY_KIND
from shoal.model.scheduling import RescheduleTask, TaskPhase

APPLICATION = BY_KIND[("kubernetes", "Application")]

app = typer.Typer(
    cls=ShoalGroup,
    help="Reschedule applications now, ignoring stickiness (creates a RescheduleTask).",
    invoke_without_command=True,
)

TASK_OPTIONS = [
    namespace(),
    param("name", str | None, typer.Option(None, "--name", help="Task name (default: generated).")),
    param(
        "ttl",
        int | None,
        typer.Option(
            None, "--ttl", min=0, help="Delete the task this many seconds after it finished."
        ),
    ),
    param(
        "wait",
        bool,
        typer.Option(
            False,
            "--wait",
            help="Follow the task with a progress bar until every target has a result.",
        ),
    ),
    param("timeout", float, typer.Option(300.0, "--timeout", help="Seconds --wait waits at most.")),
    output(),
]
"""The options of every command that creates a task."""


def task_name(prefix: str = "reschedule") -> str:
    """The time to the second and a random suffix: two tasks made in one second differ."""
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    return f"{prefix[:43].rstrip('-')}-{stamp}-{secrets.token_hex(2)}"


def _by_policy(
    ctx: typer.Context,
    selector: list[str] | None,
    all_apps: bool,
    cluster: list[str] | None,
    namespace: str,
    **task: Any,
) -> None:
    """Reschedule by selector or by cluster; see also ``shoal reschedule app NAME…``."""
    if ctx.invoked_subcommand is not None:
        return
    if not (selector or all_apps or cluster):
        typer.echo(ctx.get_help())
        raise typer.Exit(0)
    policies = [{"namespace": namespace, "label_selector": s} for s in selector or ()]
    if all_apps:
        policies.append({"namespace": namespace, "label_selector": ""})
    clusters = [c if "/" in c else f"{namespace}/{c}" for c in cluster or ()]
    _create(ctx, {"target_ref_policy": policies, "target_clusters": clusters}, **task)


def _by_name(ctx: typer.Context, names: list[str], namespace: str, **task: Any) -> None:
    """Reschedule the named applications."""
    refs = [
        {"api": "kubernetes", "kind": "Application", "namespace": namespace, "name": n}
        for n in names
    ]
    _create(ctx, {"target_ref_resource": refs}, **task)


_SELECTOR_HELP = "Applications of the namespace matching k=v,... (repeatable)"
app.callback()(
    command(
        [
            CTX,
            param(
                "selector",
                list[str] | None,
                typer.Option(None, "-l", "--selector", help=_SELECTOR_HELP),
            ),
            param(
                "all_apps",
                bool,
                typer.Option(False, "--all", help="Every application of the namespace."),
            ),
            param(
                "cluster",
                list[str] | None,
                typer.Option(
                    None, "--cluster", help="Every application now on this cluster (repeatable)."
                ),
            ),
            *TASK_OPTIONS,
        ],
        _by_policy,
    )
)
app.command("app", help="Reschedule the named applications.")(
    command(
        [
            CTX,
            param("names", list[str], names_argument(APPLICATION, "Application names.")),
            *TASK_OPTIONS,
        ],
        _by_name,
    )
)


@app.command("results")
def results(
    ctx: typer.Context,
    name: str = names_argument(BY_KIND[("scheduling", "RescheduleTask")], "Task name."),
    output: Output = output_option(),
) -> None:
    """The result of every target of a task."""
    task = run(ctx, lambda client: client.get(RescheduleTask, name))
    report_task(task, output)


def _create(
    ctx: typer.Context,
    spec: dict[str, Any],
    name: str | None,
    ttl: int | None,
    wait: bool,
    timeout: float,
    output: Output,
) -> None:
    spec["ttl_seconds_after_finished"] = ttl
    data = {
        "api": "scheduling",
        "kind": "RescheduleTask",
        "metadata": {"name": name or task_name()},
        "spec": spec,
    }
    task = build(RescheduleTask, data)
    assert isinstance(task, RescheduleTask)

    async def work(client: ShoalClient) -> RescheduleTask:
        created = await client.create(task)
        if not wait:
            return created
        return await _follow(client, created, timeout)

    final: Any = run(ctx, work)
    if not wait:
        if output is Output.table:
            typer.echo(f"RescheduleTask {final.metadata.name} created")
        else:
            print_objects(RescheduleTask, [final], output)
        return
    report_task(final, output)
    if final.status.failed:
        raise typer.Exit(1)


async def _follow(client: ShoalClient, task: RescheduleTask, timeout: float) -> RescheduleTask:
    """Watch the task until it finished, with a progress bar on stderr."""
    name = task.metadata.name
    progress = Progress(
        TextColumn(f"[bold]{name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    bar = progress.add_task(name, total=None, failed=0)

    def show(current: RescheduleTask) -> None:
        status = current.status
        if status.phase is not TaskPhase.Pending:
            done = status.successful + status.failed
            progress.update(bar, total=status.total, completed=done, failed=status.failed)

    with progress:
        return await watch_task(client, task, timeout, show)


async def watch_task(
    client: ShoalClient,
    task: RescheduleTask,
    timeout: float,
    show: Callable[[RescheduleTask], None] = lambda task: None,
) -> RescheduleTask:
    """Follow the task's watch events (``show`` sees each state) until it finished."""
    name = task.metadata.name
    ended = asyncio.Event()
    current = task

    def seen(state: RescheduleTask, deleted: bool = False) -> None:
        nonlocal current
        if ended.is_set():
            return  # events after the end are not shown
        current = state
        show(state)
        if state.status.phase is TaskPhase.Finished:
            ended.set()
        elif deleted:
            raise CliError(f"RescheduleTask {name} was deleted before it finished")

    async def relist() -> int:
        """After a compaction: the task as it is now."""
        try:
            seen(await client.get(RescheduleTask, name))
        except NotFound:
            raise CliError(f"RescheduleTask {name} was deleted") from None
        return current.metadata.resource_version or 0

    async def follow(revision: int) -> AsyncIterator[int]:
        async for event in client.watch(RescheduleTask, resource_version=revision, heartbeat=5.0):
            revision = max(revision, event.revision)
            if event.object.metadata.name == name:
                seen(event.object, deleted=event.type == "DELETED")
            yield revision

    seen(task)
    if ended.is_set():
        return current
    states = ListWatch(relist, follow, lambda error: isinstance(error, Gone), stop_on_failure)
    states.revision = task.metadata.resource_version or 0
    try:
        async with asyncio.timeout(timeout):
            await states.run_until(ended)
    except TimeoutError:
        raise CliError(f"RescheduleTask {name} did not finish within {timeout:g} s") from None
    return current


def report_task(task: RescheduleTask, output: Output) -> None:
    if output is not Output.table:
        print_objects(RescheduleTask, [task], output)
        return
    status = task.status
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 1000
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 3, 0, 0))
    for header in ("NAMESPACE", "NAME", "RESULT", "REASON", "CLUSTER", "MESSAGE"):
        table.add_column(header, no_wrap=True)
    for target in status.targets:
        style = {"Successful": "green", "Failed": "red"}.get(target.result or "", "")
        table.add_row(
            target.namespace,
            target.name,
            f"[{style}]{target.result}[/]" if style else "Pending",
            target.reason or "-",
            target.cluster or "-",
            target.message or "-",
        )
    console.print(table)
    console.print(
        f"RescheduleTask {task.metadata.name}: {status.phase}, {status.successful}/{status.total} "
        f"successful, {status.failed} failed, {status.pending} pending"
    )
