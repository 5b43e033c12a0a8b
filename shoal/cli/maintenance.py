"""``shoal kube cluster cordon|uncordon|drain``: cluster maintenance, as kubectl does it for nodes.

    shoal kube cluster cordon sim-1       # no new applications go there
    shoal kube cluster uncordon sim-1     # it takes applications again
    shoal kube cluster drain sim-1        # cordon, then move its applications off

Cordoning sets ``spec.unschedulable`` (a compare-and-swap write, redone on a
409); the scheduler's ``cordon`` filter then rejects the cluster for every new
placement, with the reason "cordoned". Applications already there stay until
something forces a pass: ``drain`` creates a RescheduleTask for every
application on the cluster (its one cluster, or a share of its replicas) and
follows it until the cluster is empty (nothing placed or running there),
except the targets the task could not move, which it reports (pinned
applications, no other cluster fits).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from shoal.cli.commands import KIND_GROUPS
from shoal.cli.config import run
from shoal.cli.errors import CliError
from shoal.cli.output import Output
from shoal.cli.params import names_argument, namespace_option
from shoal.cli.reschedule import report_task, task_name, watch_task
from shoal.client.rest import Conflict, Gone, ShoalClient
from shoal.machinery.listwatch import ListWatch, stop_on_failure
from shoal.model.application_status import placed_on, runs_on
from shoal.model.base import Metadata
from shoal.model.catalog import BY_KIND
from shoal.model.kubernetes import Application, Cluster
from shoal.model.scheduling import RescheduleTask, RescheduleTaskSpec

clusters = KIND_GROUPS[Cluster]
NamespaceOption = namespace_option()
NameArgument = names_argument(BY_KIND[("kubernetes", "Cluster")], "Cluster name.")


async def set_unschedulable(
    client: ShoalClient, name: str, namespace: str, value: bool
) -> tuple[Cluster, bool]:
    """Set ``spec.unschedulable``; the cluster, and whether it changed (a 409 reads again)."""
    while True:
        cluster = await client.get(Cluster, name, namespace)
        if cluster.spec.unschedulable == value:
            return cluster, False
        cluster.spec.unschedulable = value
        try:
            return await client.update(cluster), True
        except Conflict:
            continue


def _on(app: Application, namespace: str, name: str) -> bool:
    """Whether the application is placed or still running on the cluster: as its one
    cluster, or with a share of its replicas (an application on several clusters)."""
    for ref in (*placed_on(app.status), *runs_on(app.status)):
        if ref.name == name and (ref.namespace or namespace) == namespace:
            return True
    return False


def _a_share(app: Application) -> bool:
    """Whether the application runs on several clusters (what it has on one is a share)."""
    return app.spec.placement is not None or len(app.status.placements) > 1


@dataclass
class Drain:
    """What a drain did: its task, the applications that were on the cluster (``shares``:
    those of them with a share of their replicas there), and those still on it."""

    task: RescheduleTask
    total: int
    left: set[str] = field(default_factory=set)
    shares: int = 0

    def moved(self) -> str:
        """``3 applications moved (1 of them a share of its replicas)``."""
        text = f"{self.total} application{'' if self.total == 1 else 's'} moved"
        if self.shares:
            several = self.shares != 1
            text += f" ({self.shares} of them {'shares' if several else 'a share'} of "
            text += f"{'their' if several else 'its'} replicas)"
        return text


async def drain(
    client: ShoalClient,
    name: str,
    namespace: str,
    timeout: float,
    progress: Callable[[int, int], None] = lambda left, total: None,
) -> Drain:
    """Cordon, create a RescheduleTask for the cluster, and wait until it is empty.

    ``progress(left, total)`` is told how many applications are still on the
    cluster. It returns once the task finished and only the applications it
    could not move are left.
    """
    await set_unschedulable(client, name, namespace, True)
    listed = await client.list(Application, namespace)
    there = [a for a in listed.items if _on(a, namespace, name)]
    on = {a.metadata.name for a in there}
    total, shares = len(on), sum(1 for a in there if _a_share(a))
    progress(total, total)
    task = RescheduleTask(
        metadata=Metadata(name=task_name(f"drain-{name}")),
        spec=RescheduleTaskSpec(target_clusters=[f"{namespace}/{name}"]),
    )
    task = await client.create(task)
    changed = asyncio.Event()

    async def relist() -> int:
        """After a compaction: who is on the cluster now."""
        again = await client.list(Application, namespace)
        on.clear()
        on.update(a.metadata.name for a in again.items if _on(a, namespace, name))
        changed.set()
        return again.revision

    async def follow(revision: int) -> AsyncIterator[int]:
        """Keep ``on`` up to date from the namespace's application events."""
        async for event in client.watch(Application, namespace, resource_version=revision):
            revision = max(revision, event.revision)
            app = event.object
            if event.type != "DELETED" and _on(app, namespace, name):
                on.add(app.metadata.name)
            else:
                on.discard(app.metadata.name)
            progress(len(on), max(total, len(on)))
            changed.set()
            yield revision

    apps = ListWatch(relist, follow, lambda error: isinstance(error, Gone), stop_on_failure)
    apps.revision = listed.revision
    watcher = asyncio.create_task(apps.run())
    finished = asyncio.create_task(watch_task(client, task, timeout))
    try:
        async with asyncio.timeout(timeout):
            while True:
                if finished.done():
                    task = finished.result()
                    failed = {t.name for t in task.status.targets if t.result == "Failed"}
                    if on <= failed:
                        return Drain(task, total, set(on), shares)
                changed.clear()
                waiting = asyncio.create_task(changed.wait())
                pending = {waiting} if finished.done() else {waiting, finished}
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
    except TimeoutError:
        left = ", ".join(sorted(on))
        raise CliError(f"cluster {name} not empty after {timeout:g} s: {left}") from None
    finally:
        for job in (watcher, finished):
            if not job.done():
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await job


def _set(ctx: typer.Context, name: str, namespace: str, value: bool) -> None:
    _, changed = run(ctx, lambda client: set_unschedulable(client, name, namespace, value))
    word = "cordoned" if value else "uncordoned"
    typer.echo(f"cluster {namespace}/{name} {word if changed else 'already ' + word}")


@clusters.command("cordon")
def cordon(ctx: typer.Context, name: str = NameArgument, namespace: str = NamespaceOption) -> None:
    """Take no new applications on the cluster (those there stay); see drain."""
    _set(ctx, name, namespace, True)


@clusters.command("uncordon")
def uncordon(
    ctx: typer.Context, name: str = NameArgument, namespace: str = NamespaceOption
) -> None:
    """Let the cluster take applications again."""
    _set(ctx, name, namespace, False)


@clusters.command("drain")
def drain_command(
    ctx: typer.Context,
    name: str = NameArgument,
    namespace: str = NamespaceOption,
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds to wait for it to empty."),
) -> None:
    """Cordon the cluster and move its applications off (a RescheduleTask), until it is empty."""
    bar = Progress(
        TextColumn(f"[bold]draining {name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("moved"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )
    job = bar.add_task(name, total=None)

    def show(left: int, total: int) -> None:
        bar.update(job, total=total, completed=total - left)

    with bar:
        done = run(ctx, lambda client: drain(client, name, namespace, timeout, show))
    report_task(done.task, Output.table)
    if done.left:
        typer.echo(f"cluster {namespace}/{name} drained except: {', '.join(sorted(done.left))}")
        raise typer.Exit(1)
    typer.echo(f"cluster {namespace}/{name} drained: {done.moved()}")
