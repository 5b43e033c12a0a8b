"""``shoal import --from-krake URL``: a running Krake installation, copied into Shoal.

Every object of every kind Krake has, in every namespace, read from Krake's API
and written to Shoal's: providers and metrics first, then roles, clouds,
clusters and applications with their status (binding, state, what runs
where). An object already equal in Shoal is left alone, so a second run
changes nothing; ``--dry-run`` only says what would change.

Equal means equal on Krake's fields (``shoal.model.krake``), read through
Shoal's model (so Krake's ``null`` constraint lists equal Shoal's ``[]``),
without what a server sets on every write (uid, timestamps), without
Krake's controllers' finalizers (Shoal's controllers put their own) and
without ``kube_controller_triggered`` (see below).
An application keeps running where it runs: its status arrives with
``kube_controller_triggered`` no older than its import, so Shoal's scheduler
takes the binding as current and Shoal's application controller finds its
resources already in place instead of deploying them again: where Krake put
those without a namespace (its cluster's kubeconfig context's namespace) is
recorded in its ``status.kube_namespaces``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from shoal.cli.errors import CliError
from shoal.client.rest import NO_UPDATE_TITLE, ApiError, NotFound, ShoalClient, Unreachable
from shoal.machinery.kubeconfig import context_namespace
from shoal.machinery.types import Obj
from shoal.model import krake
from shoal.model.base import Kind
from shoal.model.kubernetes import Application
from shoal.model.registry import KINDS

_LAST = ("Cluster", "Application")
ORDER: tuple[type[Kind], ...] = tuple(
    sorted(
        (kind for kind in KINDS if kind.kind_name() in krake.FIELDS),
        key=lambda kind: _LAST.index(kind.kind_name()) + 1 if kind.kind_name() in _LAST else 0,
    )
)
"""Every kind Krake has; clusters, then applications last (they name clusters)."""

SKIPPED = {
    "metadata.uid",
    "metadata.created",
    "metadata.modified",
    "metadata.finalizers",
    "status.kube_controller_triggered",
}
"""Set by the server on every write, owned by Krake's controllers, or moved by the import."""


def collection(kind: type[Kind], namespace: str | None = None) -> str:
    """The list URL, the same on Krake and Shoal (list-all for a namespaced kind)."""
    if kind.namespaced and namespace is not None:
        return f"/{kind.api_name()}/namespaces/{namespace}/{kind.plural}"
    return f"/{kind.api_name()}/{kind.plural}"


def item(kind: type[Kind], obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{collection(kind, meta.get('namespace'))}/{meta['name']}"


def portable(kind: type[Kind], obj: Obj) -> Obj:
    """``obj`` on Krake's fields only, read through Shoal's model: what the import compares."""
    normal = kind.model_validate(obj).model_dump(mode="json")
    return _project(normal, krake.FIELDS[kind.kind_name()], "")


def _project(value: Any, fields: dict[str, Any], prefix: str) -> Any:
    """Keep the keys that Krake's table has, down through Krake's own objects."""
    if not isinstance(value, dict):
        return value
    out: Obj = {}
    for key, inner in value.items():
        path = f"{prefix}{key}"
        if path not in fields or path in SKIPPED:
            continue
        type_ = fields[path][0]
        if inner is None:
            out[key] = None
        elif type_ == "object" or type_.startswith("oneof:"):
            out[key] = _project(inner, fields, f"{path}.")
        elif type_ == "list[object]":
            out[key] = [_project(v, fields, f"{path}[].") for v in inner]
        elif type_ == "dict[str,object]":
            out[key] = {k: _project(v, fields, f"{path}{{}}.") for k, v in inner.items()}
        else:
            out[key] = inner  # Krake keeps it as it is (manifests, labels, kubeconfig)
    return out


@dataclass
class Summary:
    """What the import did (or would do), per kind."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, kind: type[Kind], outcome: str) -> None:
        self.counts.setdefault(kind.kind_name(), Counter())[outcome] += 1

    @property
    def changed(self) -> int:
        return sum(c["created"] + c["updated"] for c in self.counts.values())


Progress = Callable[[str, int], None]
"""Called with a kind name and how many of its objects were handled since the last call."""


async def import_from_krake(
    krake_api: ShoalClient,
    shoal: ShoalClient,
    dry_run: bool = False,
    progress: Progress | None = None,
    on_change: Callable[[str], None] | None = None,
) -> Summary:
    """Copy every object of Krake into Shoal (or, with ``dry_run``, only say what would change)."""
    summary = Summary()
    contexts: dict[tuple[str | None, str], str] = {}  # each cluster's context namespace
    for kind in ORDER:
        listed = await krake_api.request("GET", collection(kind))
        for obj in listed["items"]:
            meta = obj["metadata"]
            if kind.kind_name() == "Cluster":
                kubeconfig = (obj.get("spec") or {}).get("kubeconfig")
                contexts[(meta.get("namespace"), meta["name"])] = context_namespace(kubeconfig)
            outcome = await _one(kind, obj, shoal, dry_run, summary, contexts)
            summary.add(kind, outcome)
            if outcome in ("created", "updated") and on_change is not None:
                meta = obj["metadata"]
                where = f"{meta['namespace']}/" if meta.get("namespace") else ""
                verb = f"would {outcome[:-1]}" if dry_run else outcome
                on_change(f"{verb} {kind.kind_name()} {where}{meta['name']}")
            if progress is not None:
                progress(kind.kind_name(), 1)
    return summary


async def _one(
    kind: type[Kind],
    obj: Obj,
    shoal: ShoalClient,
    dry_run: bool,
    summary: Summary,
    contexts: dict[tuple[str | None, str], str],
) -> str:
    name = f"{kind.kind_name()} {obj['metadata'].get('namespace') or ''}/{obj['metadata']['name']}"
    try:
        wanted = portable(kind, obj)
        try:
            current: Obj | None = await shoal.request("GET", item(kind, obj))
        except NotFound:
            current = None
        if current is not None and portable(kind, current) == wanted:
            return "unchanged"
        if not dry_run:
            await _write(kind, obj, current, shoal, contexts)
    except (ApiError, ValueError) as error:
        summary.failures.append(f"{name}: {error}")
        return "failed"
    return "created" if current is None else "updated"


async def _write(
    kind: type[Kind],
    obj: Obj,
    current: Obj | None,
    shoal: ShoalClient,
    contexts: dict[tuple[str | None, str], str],
) -> None:
    body = {key: value for key, value in obj.items() if key != "status"}
    body["metadata"] = {
        key: value
        for key, value in obj["metadata"].items()
        if f"metadata.{key}" not in SKIPPED and key != "deleted"
    }
    if current is None:
        written = await shoal.request(
            "POST", collection(kind, obj["metadata"].get("namespace")), body=body
        )
    else:
        body["metadata"]["resource_version"] = current["metadata"].get("resource_version")
        try:
            written = await shoal.request("PUT", item(kind, obj), body=body)
        except ApiError as error:  # only the status differs: Krake's 400 "no update"
            if error.status != 400 or error.title != NO_UPDATE_TITLE:
                raise
            written = await shoal.request("GET", item(kind, obj))
    if "status" in kind.subresources and obj.get("status") is not None:
        written["status"] = dict(obj["status"])
        if kind is Application and written["status"].get("kube_controller_triggered"):
            # the binding stays current: Shoal's scheduler does not schedule it again
            written["status"]["kube_controller_triggered"] = max(
                written["status"]["kube_controller_triggered"], written["metadata"]["modified"]
            )
        if kind is Application:
            status = written["status"]
            status["kube_namespaces"] = _where_krake_put_them(status, contexts)
        await shoal.request("PUT", item(kind, obj) + "/status", body=written)


def _where_krake_put_them(
    status: Obj, contexts: dict[tuple[str | None, str], str]
) -> dict[str, str]:
    """Krake applied the objects without a namespace in its cluster's context namespace."""
    ref = status.get("running_on") or {}
    if not isinstance(ref, dict) or not ref.get("name"):
        return {}
    return {ref["name"]: contexts.get((ref.get("namespace"), ref["name"]), "default")}


def import_command(
    ctx: typer.Context,
    from_krake: Annotated[
        str, typer.Option("--from-krake", metavar="URL", help="Krake API to copy from.")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only print what would be created or updated.")
    ] = False,
    krake_token: Annotated[
        str | None, typer.Option("--krake-token", help="Bearer token for Krake's API.")
    ] = None,
) -> None:
    """Copy a Krake installation into Shoal: every namespace, every kind, with status.

    Idempotent: objects already equal in Shoal are left alone, so a second run
    changes nothing. Applications keep running where they run.
    """
    from rich.console import Console
    from rich.progress import Progress as Bar
    from rich.table import Table

    from shoal.cli.config import run

    console = Console()

    async def work(shoal: ShoalClient) -> Summary:
        own = ssl.create_default_context()  # Shoal's token and certificate stay with Shoal
        async with ShoalClient(from_krake, token=krake_token or "", ssl_context=own) as krake_api:
            with Bar(console=console, transient=True) as bar:
                tasks: dict[str, Any] = {}
                try:
                    totals = await asyncio.gather(
                        *(krake_api.request("GET", collection(kind)) for kind in ORDER)
                    )
                except Unreachable:  # the Krake API, not Shoal's
                    raise CliError(
                        f"cannot reach the Krake API at {from_krake} (--from-krake): no "
                        "answer (connection refused or timed out)", 2
                    ) from None
                for kind, listed in zip(ORDER, totals, strict=True):
                    tasks[kind.kind_name()] = bar.add_task(
                        kind.kind_name(), total=len(listed["items"])
                    )

                def advance(kind_name: str, count: int) -> None:
                    bar.advance(tasks[kind_name], count)

                return await import_from_krake(
                    krake_api, shoal, dry_run, advance, on_change=console.print if dry_run else None
                )

    summary = run(ctx, work)
    table = Table(title="would change (dry run)" if dry_run else "imported from Krake")
    for header in ("KIND", "CREATED", "UPDATED", "UNCHANGED", "FAILED"):
        table.add_column(header, justify="left" if header == "KIND" else "right")
    for kind in ORDER:
        counts = summary.counts.get(kind.kind_name(), Counter())
        table.add_row(
            kind.kind_name(),
            *(str(counts[k]) for k in ("created", "updated", "unchanged", "failed")),
        )
    console.print(table)
    for failure in summary.failures:
        console.print(f"[red]failed[/] {failure}")
    if summary.failures:
        raise typer.Exit(1)


def install(root: typer.Typer) -> None:
    root.command("import")(import_command)
