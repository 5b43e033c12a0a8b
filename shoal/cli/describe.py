"""``shoal kube app|cluster describe NAME``: one page that answers "why is it there, what happened".

Laid out as ``kubectl describe`` lays out its pages: ``Key:  value`` lines,
indented sections, small tables, and the object's recent events last. An
application's page has its spec in short, its status, and the ranking of the
scheduler's last decision (``status.scheduling``); a cluster's page has its
metrics, whether it is cordoned, its nodes and the applications placed there.
Everything is read from the API as JSON dicts (one request per section).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import typer

from shoal.cli.commands import KIND_GROUPS
from shoal.cli.config import run
from shoal.cli.names import DEFAULT_NAMESPACE
from shoal.cli.output import FORMATS, degraded, describe_shares, dig, show, table_lines
from shoal.cli.params import names_argument, namespace_option
from shoal.client.rest import NotFound, ShoalClient
from shoal.events.recorder import KIND_LABEL, NAME_LABEL, UID_LABEL
from shoal.machinery.paging import every_item
from shoal.model.application_status import staleness
from shoal.model.base import Kind
from shoal.model.catalog import BY_KIND
from shoal.model.kubernetes import Application, Cluster

EVENTS = 20  # the most recent events shown

Page = list[str]


def _age(obj: dict[str, Any], value: Any) -> str:
    return show(FORMATS["age"](obj, value))


def _when(obj: dict[str, Any], value: Any) -> str:
    """A time in full with its age: ``2026-11-23T13:00:00Z (5m ago)``."""
    return f"{value} ({_age(obj, value)} ago)" if value else "-"


def _fields(page: Page, pairs: Iterable[tuple[str, Any]], indent: int = 0) -> None:
    """``Key:  value`` lines with the values in one column."""
    pairs = list(pairs)
    width = max(len(k) for k, _ in pairs) + 2
    for key, value in pairs:
        page.append(" " * indent + f"{key}:".ljust(width) + show(value))


def _table(page: Page, title: str, headers: list[str], rows: list[list[str]], empty: str) -> None:
    page.append(f"{title}:")
    if not rows:
        page.append(f"  {empty}")
        return
    page.extend(table_lines(headers, rows, indent=2))


def _labels(obj: dict[str, Any]) -> str:
    labels = dig(obj, "metadata.labels") or {}
    return ", ".join(f"{k}={v}" for k, v in labels.items()) or "<none>"


def _metadata(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("Name", dig(obj, "metadata.name")),
        ("Namespace", dig(obj, "metadata.namespace")),
        ("Labels", _labels(obj)),
        ("Created", _when(obj, dig(obj, "metadata.created"))),
    ]


def _reason(reason: Any) -> str:
    if not isinstance(reason, dict):
        return "-"
    return f"{reason.get('code')}: {reason.get('message') or ''}".rstrip(": ")


def _terms(entry: dict[str, Any]) -> str:
    """One ranked cluster's score terms: value, normalised × weight; stickiness; failing."""
    parts = [
        f"{m['name']}={show(m.get('value'))} ({m.get('normalised', 0):.3f}×{show(m.get('weight'))})"
        for m in entry.get("metrics") or []
    ]
    sticky = entry.get("stickiness")
    if sticky:
        parts.append(f"stickiness 1.0×{show(sticky.get('weight'))}")
    failing = entry.get("failing_metrics") or {}
    parts += [f"{k} failing ({v})" for k, v in failing.items()]
    return ", ".join(parts) or "-"


def chosen_text(scheduling: dict[str, Any]) -> str | None:
    """The cluster(s) a decision chose: every one of a multi-cluster placement, in order."""
    several = scheduling.get("chosen_clusters")
    if isinstance(several, list) and len(several) > 1:
        return ", ".join(str(name) for name in several)
    chosen = scheduling.get("chosen")
    score = scheduling.get("score")
    if chosen and isinstance(score, int | float):
        return f"{chosen} (score {score:.4f})"
    return str(chosen) if chosen else None


def decision_section(page: Page, obj: dict[str, Any]) -> None:
    """The last decision: summary, the ranking with its score terms, the rejections."""
    scheduling = dig(obj, "status.scheduling")
    if not isinstance(scheduling, dict):
        page.append("Last decision:  <none yet>")
        return
    page.append("Last decision:")
    _fields(
        page,
        [
            ("Summary", scheduling.get("summary")),
            ("Chosen", chosen_text(scheduling)),
            ("Forced", scheduling.get("forced", False)),
            ("Decided", scheduling.get("time")),
            *([("Stale", "; ".join(scheduling["stale"]) or "no")] if "stale" in scheduling else []),
        ],
        indent=2,
    )
    rows = [
        [str(i + 1), e.get("cluster", "?"), f"{e.get('score', 0):.4f}", _terms(e)]
        for i, e in enumerate(scheduling.get("ranking") or [])
    ]
    if rows:
        page.extend(table_lines(["RANK", "CLUSTER", "SCORE", "TERMS"], rows, indent=2))
    rejected = [
        [r.get("reason", "?"), str(r.get("count", 0)), ", ".join(r.get("clusters") or [])]
        for r in scheduling.get("rejected") or []
    ]
    if rejected:
        page.extend(table_lines(["REJECTED BY", "COUNT", "CLUSTERS"], rejected, indent=2))


async def events_of(client: ShoalClient, obj: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The object's most recent events, newest last; None when the API keeps no events.

    The API labels each event with its object's kind, name and uid, so a label selector
    asks for this object's only (not those of an object deleted before under its name);
    the kind, namespace and uid are checked again here.
    """
    namespace = dig(obj, "metadata.namespace") or DEFAULT_NAMESPACE
    uid = dig(obj, "metadata.uid")
    selector = f"{KIND_LABEL}={obj.get('kind')},{NAME_LABEL}={dig(obj, 'metadata.name')}"
    if uid:
        selector += f",{UID_LABEL}={uid}"
    path = f"/core/namespaces/{namespace}/events"
    try:
        listed = await client.request("GET", path, params={"label_selector": selector})
    except NotFound:
        return None
    about = (obj.get("kind"), dig(obj, "metadata.name"))
    mine = [
        e
        for e in listed.get("items") or []
        if (dig(e, "involved_object.kind"), dig(e, "involved_object.name")) == about
        and dig(e, "involved_object.namespace") in (None, namespace)
        and (not uid or dig(e, "involved_object.uid") == uid)
    ]
    mine.sort(key=lambda e: str(e.get("last_timestamp") or ""))
    return mine[-EVENTS:]


def events_section(page: Page, events: list[dict[str, Any]] | None) -> None:
    rows = [
        [
            _age(e, e.get("last_timestamp")),
            show(e.get("type")),
            show(e.get("reason")),
            show(e.get("reporting_component")),
            show(e.get("count")),
            show(e.get("message")),
        ]
        for e in events or []
    ]
    headers = ["LAST SEEN", "TYPE", "REASON", "FROM", "COUNT", "MESSAGE"]
    _table(page, "Events", headers, rows, "<none>" if events is not None else "<not kept>")


def _app_state(status: dict[str, Any]) -> Any:
    """``RUNNING, Degraded`` while a placement runs short of what it asked for."""
    state = status.get("state")
    return state if degraded(status.get("conditions")) is None else f"{state}, Degraded"


def _degraded_rows(app: dict[str, Any], status: dict[str, Any]) -> list[tuple[str, Any]]:
    message = degraded(status.get("conditions"))
    if message is None:
        return []
    since = next((c.get("since") for c in status.get("conditions") or []
                  if isinstance(c, dict) and c.get("type") == "Degraded"), None)  # fmt: skip
    return [("Degraded", f"{message} (since {_when(app, since)})")]


def app_page(app: dict[str, Any], events: list[dict[str, Any]] | None) -> Page:
    page: Page = []
    spec, status = app.get("spec") or {}, app.get("status") or {}
    constraints = spec.get("constraints") or {}
    cluster = constraints.get("cluster") or {}
    health = status.get("container_health") or {}
    manifest = ", ".join(
        f"{m.get('kind')}/{dig(m, 'metadata.name')}" for m in spec.get("manifest") or []
    )
    _fields(
        page,
        [
            *_metadata(app),
            ("Manifest", manifest or "<none>"),
            ("State", _app_state(status)),
            ("Reason", _reason(status.get("reason"))),
            *_degraded_rows(app, status),
            ("Scheduled to", FORMATS["ref"](app, status.get("scheduled_to"))),
            ("Scheduled", _when(app, status.get("scheduled"))),
            ("Running on", FORMATS["ref"](app, status.get("running_on"))),
            ("Failed attempts", status.get("scheduler_attempts", 0)),
            ("Next retry", _when(app, status.get("next_retry"))),
            ("Pods", f"{health.get('running_pods', 0)}/{health.get('desired_pods', 0)} running"),
        ],
    )
    page.append("Constraints:")
    _fields(
        page,
        [
            ("Migration", "allowed" if constraints.get("migration", True) else "pinned"),
            ("Labels", "; ".join(cluster.get("labels") or []) or "-"),
            ("Metrics", "; ".join(cluster.get("metrics") or []) or "-"),
            ("Custom resources", ", ".join(cluster.get("custom_resources") or []) or "-"),
        ],
        indent=2,
    )
    placements_section(page, app)
    decision_section(page, app)
    events_section(page, events)
    return page


def placements_section(page: list[str], app: dict[str, Any]) -> None:
    """Each cluster of an application on several: its share and why (score, room, weight)."""
    placements = dig(app, "status.placements") or []
    if not placements:
        return
    placement = dig(app, "spec.placement") or {}
    why = {e.get("cluster"): e for e in dig(app, "status.scheduling.placements") or []}
    mode = placement.get("replicas", "duplicated")
    weights = placement.get("weights", "even")
    weights = weights if isinstance(weights, str) else "static"
    shares = [p.get("replicas") for p in placements]
    page.append(f"Placements: {describe_shares(shares)}, replicas {mode}"
                + (f", weights {weights}" if mode == "divided" else ""))  # fmt: skip
    rows = []
    for entry in placements:
        name = dig(entry, "cluster.name")
        reason = _reason(entry.get("reason"))
        note = why.get(name) or {}
        rows.append([
            show(name), show(entry.get("replicas") if entry.get("replicas") is not None else "all"),
            show(entry.get("ready_replicas")), show(entry.get("state")),
            FORMATS["score"](app, note.get("score")), show(note.get("room")),
            show(note.get("weight")), show(note.get("spread")), show(note.get("group")),
            reason if reason != "-" else "",
        ])  # fmt: skip
    headers = ["CLUSTER", "SHARE", "READY", "STATE", "SCORE", "ROOM", "WEIGHT", "SPREAD",
               "GROUP", "REASON"]  # fmt: skip
    page.extend(table_lines(headers, rows, indent=2))


def _quantity(resource: str, value: Any) -> str:
    """A resource amount as Kubernetes writes it: ``16``, ``1500m``, ``512Gi``, ``110``."""
    from shoal.machinery.resources import amount, format_amount

    if not isinstance(value, int | float) or isinstance(value, bool):
        return show(value)
    return format_amount(resource, amount(resource, value))


def _quantities(amounts: Any) -> Any:
    if not isinstance(amounts, dict):
        return amounts
    return ",".join(f"{k}={_quantity(k, v)}" for k, v in amounts.items())


def _nodes(cluster: dict[str, Any]) -> tuple[dict[str, Any] | None, list[list[str]]]:
    """The observer's node totals and one row per node it lists."""
    listed = dig(cluster, "status.node_summary") or []
    total = next((n for n in listed if n.get("summary")), None)
    rows = [
        [
            show(n.get("name")),
            "Ready" if n.get("ready") else "NotReady " + ",".join(n.get("pressure") or []),
            _quantity("cpu", dig(n, "allocatable.cpu")),
            _quantity("memory", dig(n, "allocatable.memory")),
            _quantity("pods", dig(n, "allocatable.pods")),
        ]
        for n in listed
        if not n.get("summary")
    ]
    return total, rows


def _mode_fields(
    cluster: dict[str, Any], spec: dict[str, Any], status: dict[str, Any]
) -> list[tuple[str, Any]]:
    """How the hub reaches the cluster; for a pull cluster, its agent and its lease."""
    if spec.get("mode", "push") != "pull":
        return [("Mode", "push (the hub dials it with its kubeconfig)")]
    return [
        ("Mode", "pull (its agent dials the hub)"),
        ("Agent", status.get("agent_version") or "not heard from yet"),
        ("Last heartbeat", _when(cluster, status.get("heartbeat"))),
    ]


def cluster_page(
    cluster: dict[str, Any], apps: list[dict[str, Any]], events: list[dict[str, Any]] | None
) -> Page:
    page: Page = []
    spec, status = cluster.get("spec") or {}, cluster.get("status") or {}
    total, nodes = _nodes(cluster)
    failing = status.get("metrics_reasons") or {}
    crds = status.get("custom_resources") or []
    _fields(
        page,
        [
            *_metadata(cluster),
            ("State", status.get("state")),
            ("Reason", _reason(status.get("reason"))),
            *_mode_fields(cluster, spec, status),
            ("Unschedulable", "yes (cordoned)" if spec.get("unschedulable") else "no"),
            ("Custom resources", sorted({*spec.get("custom_resources", []), *crds})),
            (
                "Nodes",
                f"{total.get('ready')}/{total.get('count')} ready" if total else "not observed yet",
            ),
            ("Allocatable", _quantities((total or {}).get("allocatable"))),
        ],
    )
    metrics = [
        [
            m.get("name", "?"),
            show(m.get("weight")),
            "namespaced" if m.get("namespaced") else "global",
            _reason(failing[m["name"]]) if m.get("name") in failing else "ok",
        ]
        for m in spec.get("metrics") or []
    ]
    _table(page, "Metrics", ["METRIC", "WEIGHT", "SCOPE", "STATUS"], metrics, "<none>")
    _table(
        page,
        "Nodes",
        ["NODE", "STATUS", "CPU", "MEMORY", "PODS"],
        nodes,
        "<not observed yet>",
    )
    namespace = dig(cluster, "metadata.namespace") or DEFAULT_NAMESPACE
    name = dig(cluster, "metadata.name")
    rows = [
        [
            show(dig(a, "metadata.name")),
            show(dig(a, "status.state")),
            _share_on(a, namespace, name),
            show(FORMATS["ref"](a, dig(a, "status.running_on"))),
            _age(a, dig(a, "status.scheduled")),
        ]
        for a in apps
    ]
    headers = ["NAME", "STATE", "SHARE", "RUNNING_ON", "PLACED"]
    _table(page, "Applications", headers, rows, "<none>")
    events_section(page, events)
    return page


def _is(ref: Any, namespace: str, name: str) -> bool:
    return (
        isinstance(ref, dict)
        and ref.get("name") == name
        and (ref.get("namespace") or namespace) == namespace
    )


def _placed_on(app: dict[str, Any], namespace: str, name: str) -> bool:
    """Placed on the cluster: as its one cluster, or with a share of its replicas."""
    placements = dig(app, "status.placements") or []
    return _is(dig(app, "status.scheduled_to"), namespace, name) or any(
        _is(p.get("cluster"), namespace, name) for p in placements if isinstance(p, dict)
    )


def _share_on(app: dict[str, Any], namespace: str, name: str) -> str:
    """What of the application the cluster runs: ``all`` (its one cluster, or every
    replica: duplicated), ``4 of 10`` (its share of divided replicas)."""
    placements = [p for p in dig(app, "status.placements") or [] if isinstance(p, dict)]
    mine = next((p for p in placements if _is(p.get("cluster"), namespace, name)), None)
    if mine is None or len(placements) < 2 or mine.get("replicas") is None:
        return "all"
    total = sum(p.get("replicas") or 0 for p in placements)
    return f"{mine['replicas']} of {total}"


async def describe_app(client: ShoalClient, name: str, namespace: str) -> Page:
    path = f"/kubernetes/namespaces/{namespace}/applications/{name}"
    app: dict[str, Any] = await client.request("GET", path)
    scheduling = dig(app, "status.scheduling")
    if isinstance(scheduling, dict) and scheduling.get("clusters"):  # what changed since
        clusters = (await client.list(Cluster, namespace)).items
        scheduling["stale"] = staleness(scheduling, clusters)
    return app_page(app, await events_of(client, app))


async def _items(client: ShoalClient, path: str) -> list[dict[str, Any]]:
    """Every item of a collection, following its ``continue`` pages."""
    return await every_item(lambda query: client.request("GET", path, params=query))


async def describe_cluster(client: ShoalClient, name: str, namespace: str) -> Page:
    base = f"/kubernetes/namespaces/{namespace}"
    cluster: dict[str, Any] = await client.request("GET", f"{base}/clusters/{name}")
    # A share of a multi-cluster application is an entry of its placements list, which a
    # field selector cannot test: the namespace's applications are read and sorted here.
    apps = [
        a
        for a in await _items(client, f"{base}/applications")
        if _placed_on(a, namespace, name)
    ]
    return cluster_page(cluster, apps, await events_of(client, cluster))


def _command(kind: type[Kind], what: str, page: Callable[..., Awaitable[Page]], help: str) -> None:
    """``shoal kube app|cluster describe NAME [-n NS]``."""

    def describe(
        ctx: typer.Context,
        name: str = names_argument(BY_KIND[("kubernetes", kind.__name__)], f"{what} name."),
        namespace: str = namespace_option(),
    ) -> None:
        typer.echo("\n".join(run(ctx, lambda client: page(client, name, namespace))))

    KIND_GROUPS[kind].command("describe", help=help)(describe)


_command(
    Application,
    "Application",
    describe_app,
    "Spec, status, the last decision's ranking and recent events of an application.",
)
_command(
    Cluster,
    "Cluster",
    describe_cluster,
    "Status, metrics, nodes, applications placed there and recent events of a cluster.",
)
