"""``shoal kube``: applications and clusters, as Krake's ``rok kube`` has them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
import yaml

from shoal.cli.common import (
    DEFAULT_NAMESPACE,
    CliError,
    Output,
    add_read_commands,
    apply_labels,
    create_object,
    metric_refs,
    namespace_option,
    new_group,
    new_object,
    output_option,
    parse_labels,
    print_data,
    read_mappings,
    run,
    update_object,
)
from shoal.model.kubernetes import Application, Cluster

app = new_group("Applications and clusters (group kubernetes).")
applications = new_group("Applications: create, list, get, update, delete.")
clusters = new_group("Clusters: register, create, list, get, update, delete.")
app.add_typer(applications, name="app")
app.add_typer(applications, name="application", hidden=True)
app.add_typer(clusters, name="cluster")

LABEL_HELP = "Label KEY=VALUE (repeatable; on update KEY- removes it)."
LABEL_CONSTRAINT_HELP = "Cluster label constraint, e.g. 'location is DE' (repeatable)."
METRIC_CONSTRAINT_HELP = "Cluster metric constraint, e.g. 'load < 3' (repeatable)."
CR_HELP = "Custom resource '<plural>.<group>' the cluster must support (repeatable)."
METRIC_HELP = "Namespaced metric and its weight: --metric NAME WEIGHT (repeatable)."
GLOBAL_METRIC_HELP = "Global metric and its weight: --global-metric NAME WEIGHT (repeatable)."


# applications ------------------------------------------------------------------


def _manifest(path: str) -> list[dict[str, Any]]:
    return read_mappings(path)


def _change_application(
    data: dict[str, Any],
    *,
    manifest: str | None,
    labels: list[str] | None,
    label_constraints: list[str] | None,
    metric_constraints: list[str] | None,
    custom_resources: list[str] | None,
    migration: bool | None,
    backoff: int | None,
    backoff_delay: int | None,
    backoff_limit: int | None,
    hooks: list[str] | None,
) -> None:
    """Apply the given flags to an application's dict; unset flags leave fields alone."""
    apply_labels(data["metadata"], parse_labels(labels))
    spec = data.setdefault("spec", {})
    if manifest is not None:
        spec["manifest"] = _manifest(manifest)
    constraints = spec.setdefault("constraints", {})
    cluster = constraints.setdefault("cluster", {})
    if label_constraints:
        cluster["labels"] = list(label_constraints)
    if metric_constraints:
        cluster["metrics"] = list(metric_constraints)
    if custom_resources:
        cluster["custom_resources"] = list(custom_resources)
    if migration is not None:
        constraints["migration"] = migration
    for key, value in (
        ("backoff", backoff),
        ("backoff_delay", backoff_delay),
        ("backoff_limit", backoff_limit),
    ):
        if value is not None:
            spec[key] = value
    if hooks:
        spec["hooks"] = list(hooks)


@applications.command("create")
def app_create(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Application name."),
    file: str = typer.Option(
        ...,
        "-f",
        "--file",
        help="Kubernetes manifest (several YAML documents allowed; - is stdin).",
    ),
    namespace: str = namespace_option(),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    label_constraints: list[str] | None = typer.Option(
        None, "-L", "--cluster-label-constraint", help=LABEL_CONSTRAINT_HELP
    ),
    metric_constraints: list[str] | None = typer.Option(
        None, "-M", "--cluster-metric-constraint", help=METRIC_CONSTRAINT_HELP
    ),
    custom_resources: list[str] | None = typer.Option(
        None, "-R", "--cluster-resource-constraint", help=CR_HELP
    ),
    disable_migration: bool = typer.Option(
        False, "--disable-migration", help="Never migrate once placed."
    ),
    backoff: int | None = typer.Option(None, "--backoff", help="Backoff multiplier."),
    backoff_delay: int | None = typer.Option(None, "--backoff-delay", help="Seconds."),
    backoff_limit: int | None = typer.Option(
        None, "--backoff-limit", help="Retries before FAILED (-1: forever)."
    ),
    hooks: list[str] | None = typer.Option(
        None, "--hook", help="Enable a hook: complete or shutdown (repeatable)."
    ),
    output: Output = output_option(),
) -> None:
    """Create an application from a Kubernetes manifest."""
    data = new_object(Application, name, namespace, {})
    data["spec"] = {}
    _change_application(
        data,
        manifest=file,
        labels=labels,
        label_constraints=label_constraints,
        metric_constraints=metric_constraints,
        custom_resources=custom_resources,
        migration=False if disable_migration else None,
        backoff=backoff,
        backoff_delay=backoff_delay,
        backoff_limit=backoff_limit,
        hooks=hooks,
    )
    create_object(ctx, data, Application, output)


@applications.command("update")
def app_update(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Application name."),
    file: str | None = typer.Option(None, "-f", "--file", help="New Kubernetes manifest."),
    namespace: str = namespace_option(),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    label_constraints: list[str] | None = typer.Option(
        None, "-L", "--cluster-label-constraint", help=LABEL_CONSTRAINT_HELP + " Replaces."
    ),
    metric_constraints: list[str] | None = typer.Option(
        None, "-M", "--cluster-metric-constraint", help=METRIC_CONSTRAINT_HELP + " Replaces."
    ),
    custom_resources: list[str] | None = typer.Option(
        None, "-R", "--cluster-resource-constraint", help=CR_HELP + " Replaces."
    ),
    disable_migration: bool = typer.Option(False, "--disable-migration"),
    enable_migration: bool = typer.Option(False, "--enable-migration"),
    backoff: int | None = typer.Option(None, "--backoff", help="Backoff multiplier."),
    backoff_delay: int | None = typer.Option(None, "--backoff-delay", help="Seconds."),
    backoff_limit: int | None = typer.Option(None, "--backoff-limit", help="-1: forever."),
    hooks: list[str] | None = typer.Option(None, "--hook", help="Hooks (replaces)."),
    output: Output = output_option(),
) -> None:
    """Change an application: only the given flags change it."""
    if disable_migration and enable_migration:
        raise CliError("--disable-migration and --enable-migration exclude each other")
    migration = True if enable_migration else False if disable_migration else None
    manifest = _manifest(file) if file is not None else None

    def change(data: dict[str, Any]) -> None:
        _change_application(
            data,
            manifest=None,
            labels=labels,
            label_constraints=label_constraints,
            metric_constraints=metric_constraints,
            custom_resources=custom_resources,
            migration=migration,
            backoff=backoff,
            backoff_delay=backoff_delay,
            backoff_limit=backoff_limit,
            hooks=hooks,
        )
        if manifest is not None:
            data["spec"]["manifest"] = manifest

    update_object(ctx, Application, name, namespace, change, output)


add_read_commands(applications, Application, "applications")


# clusters ----------------------------------------------------------------------


def load_kubeconfig(path: str, context: str | None = None) -> dict[str, Any]:
    """A kubeconfig reduced to exactly one context, user and cluster, as the API wants."""
    docs = read_mappings(path)
    if len(docs) != 1:
        raise CliError(f"kubeconfig {path} must hold one YAML document, found {len(docs)}")
    config = docs[0]
    contexts = [c for c in config.get("contexts") or [] if isinstance(c, dict)]
    names = [str(c.get("name")) for c in contexts]
    if context is not None:
        chosen = [c for c in contexts if c.get("name") == context]
        if not chosen:
            raise CliError(
                f"kubeconfig {path} has no context {context!r}; "
                f"it has: {', '.join(names) or 'none'}"
            )
    elif len(contexts) == 1:
        chosen = contexts
    elif not contexts:
        raise CliError(f"kubeconfig {path} has no contexts; Shoal needs exactly one")
    else:
        raise CliError(
            f"kubeconfig {path} has {len(contexts)} contexts ({', '.join(names)}); "
            "Shoal needs exactly one: pick one with --context NAME"
        )
    ctx = chosen[0]
    inner = ctx.get("context") or {}
    if not isinstance(inner, dict):
        raise CliError(f"kubeconfig {path}: context {ctx.get('name')!r} is malformed")

    def pick(section: str, name: Any) -> dict[str, Any]:
        entries = [e for e in config.get(section) or [] if isinstance(e, dict)]
        found = [e for e in entries if e.get("name") == name]
        if not found:
            raise CliError(
                f"kubeconfig {path}: context {ctx.get('name')!r} names {section[:-1]} "
                f"{name!r}, which is not in {section}"
            )
        return found[0]

    cluster = pick("clusters", inner.get("cluster"))
    user = pick("users", inner.get("user"))
    reduced = {
        key: value for key, value in config.items() if key not in ("contexts", "clusters", "users")
    }
    reduced.update(
        {
            "contexts": [ctx],
            "clusters": [cluster],
            "users": [user],
            "current-context": ctx.get("name"),
        }
    )
    return reduced


def _read_tosca(path: str) -> Any:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CliError(f"{path} is not valid YAML: {error}") from None


def _change_cluster(
    data: dict[str, Any],
    *,
    labels: list[str] | None,
    metrics: list[str] | None,
    global_metrics: list[str] | None,
    custom_resources: list[str] | None,
    label_constraints: list[str] | None,
    metric_constraints: list[str] | None,
    inherit_metrics: bool | None,
) -> None:
    apply_labels(data["metadata"], parse_labels(labels))
    spec = data.setdefault("spec", {})
    refs = metric_refs(global_metrics, metrics)
    if refs is not None:
        spec["metrics"] = refs
    if custom_resources:
        spec["custom_resources"] = list(custom_resources)
    cloud = spec.setdefault("constraints", {}).setdefault("cloud", {})
    if label_constraints:
        cloud["labels"] = list(label_constraints)
    if metric_constraints:
        cloud["metrics"] = list(metric_constraints)
    if inherit_metrics is not None:
        spec["inherit_metrics"] = inherit_metrics


@clusters.command("register")
def cluster_register(
    ctx: typer.Context,
    name: str | None = typer.Argument(
        None, help="Cluster name (default: the kubeconfig context's cluster name)."
    ),
    kubeconfig: str = typer.Option(..., "-k", "--kubeconfig", help="Kubeconfig file."),
    context: str | None = typer.Option(
        None, "--context", help="Context to take from a kubeconfig with several."
    ),
    namespace: str = namespace_option(),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    metrics: list[str] | None = typer.Option(None, "--metric", help=METRIC_HELP),
    global_metrics: list[str] | None = typer.Option(
        None, "--global-metric", help=GLOBAL_METRIC_HELP
    ),
    custom_resources: list[str] | None = typer.Option(
        None, "-R", "--custom-resource", help="CRD '<plural>.<group>' the cluster has."
    ),
    inherit_metrics: bool = typer.Option(
        False, "--inherit-metrics", help="Take the metrics of the cloud it runs on."
    ),
    output: Output = output_option(),
) -> None:
    """Register an existing Kubernetes cluster from its kubeconfig."""
    config = load_kubeconfig(kubeconfig, context)
    if name is None:
        name = str(config["clusters"][0].get("name"))
    data = new_object(Cluster, name, namespace, {})
    data["spec"] = {"kubeconfig": config}
    _change_cluster(
        data,
        labels=labels,
        metrics=metrics,
        global_metrics=global_metrics,
        custom_resources=custom_resources,
        label_constraints=None,
        metric_constraints=None,
        inherit_metrics=inherit_metrics or None,
    )
    create_object(ctx, data, Cluster, output)


@clusters.command("create")
def cluster_create(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Cluster name."),
    tosca: str | None = typer.Option(
        None, "-f", "--file", help="TOSCA template (YAML) describing the cluster."
    ),
    namespace: str = namespace_option(),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    label_constraints: list[str] | None = typer.Option(
        None, "-L", "--cloud-label-constraint", help="Cloud label constraint (repeatable)."
    ),
    metric_constraints: list[str] | None = typer.Option(
        None, "-M", "--cloud-metric-constraint", help="Cloud metric constraint (repeatable)."
    ),
    metrics: list[str] | None = typer.Option(None, "--metric", help=METRIC_HELP),
    global_metrics: list[str] | None = typer.Option(
        None, "--global-metric", help=GLOBAL_METRIC_HELP
    ),
    custom_resources: list[str] | None = typer.Option(
        None, "-R", "--custom-resource", help="CRD '<plural>.<group>' the cluster has."
    ),
    inherit_metrics: bool = typer.Option(
        False, "--inherit-metrics", help="Take the metrics of the cloud it runs on."
    ),
    output: Output = output_option(),
) -> None:
    """Create a cluster that Shoal places on a cloud (no kubeconfig yet)."""
    data = new_object(Cluster, name, namespace, {})
    data["spec"] = {}
    if tosca is not None:
        data["spec"]["tosca"] = _read_tosca(tosca)
    _change_cluster(
        data,
        labels=labels,
        metrics=metrics,
        global_metrics=global_metrics,
        custom_resources=custom_resources,
        label_constraints=label_constraints,
        metric_constraints=metric_constraints,
        inherit_metrics=inherit_metrics or None,
    )
    create_object(ctx, data, Cluster, output)


@clusters.command("update")
def cluster_update(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Cluster name."),
    kubeconfig: str | None = typer.Option(None, "-k", "--kubeconfig", help="New kubeconfig."),
    context: str | None = typer.Option(None, "--context", help="Context of the kubeconfig."),
    namespace: str = namespace_option(),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    metrics: list[str] | None = typer.Option(
        None, "--metric", help=METRIC_HELP + " Given metrics replace all metrics."
    ),
    global_metrics: list[str] | None = typer.Option(
        None, "--global-metric", help=GLOBAL_METRIC_HELP + " Replaces all metrics."
    ),
    custom_resources: list[str] | None = typer.Option(
        None, "-R", "--custom-resource", help="CRDs (replaces)."
    ),
    label_constraints: list[str] | None = typer.Option(
        None, "-L", "--cloud-label-constraint", help="Cloud label constraints (replaces)."
    ),
    metric_constraints: list[str] | None = typer.Option(
        None, "-M", "--cloud-metric-constraint", help="Cloud metric constraints (replaces)."
    ),
    inherit_metrics: bool | None = typer.Option(
        None, "--inherit-metrics/--no-inherit-metrics", help="Take the cloud's metrics."
    ),
    output: Output = output_option(),
) -> None:
    """Change a cluster: only the given flags change it."""
    config = load_kubeconfig(kubeconfig, context) if kubeconfig is not None else None

    def change(data: dict[str, Any]) -> None:
        _change_cluster(
            data,
            labels=labels,
            metrics=metrics,
            global_metrics=global_metrics,
            custom_resources=custom_resources,
            label_constraints=label_constraints,
            metric_constraints=metric_constraints,
            inherit_metrics=inherit_metrics,
        )
        if config is not None:
            data["spec"]["kubeconfig"] = config

    update_object(ctx, Cluster, name, namespace, change, output)


add_read_commands(clusters, Cluster, "clusters")

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
    if explanation.get("chosen"):
        console.print(
            f"chosen: [bold cyan]{explanation['chosen']}[/] (score {explanation['score']:.4f})"
        )
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
    name: str = typer.Argument(..., help="Application name."),
    namespace: str = namespace_option(),
    output: Output = output_option(),
) -> None:
    """Why the application is where it is: the scheduler's last decision."""

    async def work(client: Any) -> dict[str, Any]:
        found = await client.get(Application, name, namespace)
        explanation: dict[str, Any] = dict(found.status.scheduling or {})
        if found.status.reason is not None:
            explanation.setdefault("reason", found.status.reason.model_dump(mode="json"))
        return explanation

    _show_explanation(run(ctx, work), output, f"{namespace}/{name}")


@applications.command("dryrun")
def app_dryrun(
    ctx: typer.Context,
    file: str = typer.Option(
        ..., "-f", "--file", help="Application (YAML/JSON object) or a manifest with -L/-M/-R."
    ),
    name: str = typer.Option("dryrun", "--name", help="Name, when -f is a manifest."),
    namespace: str = namespace_option(),
    label_constraints: list[str] | None = typer.Option(
        None, "-L", "--cluster-label-constraint", help=LABEL_CONSTRAINT_HELP
    ),
    metric_constraints: list[str] | None = typer.Option(
        None, "-M", "--cluster-metric-constraint", help=METRIC_CONSTRAINT_HELP
    ),
    custom_resources: list[str] | None = typer.Option(
        None, "-R", "--cluster-resource-constraint", help=CR_HELP
    ),
    output: Output = output_option(),
) -> None:
    """Where would this application be placed now, and why? Binds nothing."""
    docs = read_mappings(file)
    if len(docs) == 1 and docs[0].get("kind") == "Application":
        data = docs[0]
        data.setdefault("metadata", {}).setdefault("name", name)
    else:
        data = new_object(Application, name, namespace, {})
        data["spec"] = {}
        _change_application(
            data,
            manifest=file,
            labels=None,
            label_constraints=label_constraints,
            metric_constraints=metric_constraints,
            custom_resources=custom_resources,
            migration=None,
            backoff=None,
            backoff_delay=None,
            backoff_limit=None,
            hooks=None,
        )

    async def work(client: Any) -> dict[str, Any]:
        path = f"/scheduling/namespaces/{namespace}/dryrun"
        result: dict[str, Any] = await client.request("POST", path, body=data)
        return result

    _show_explanation(run(ctx, work), output, "dry run")


__all__ = ["DEFAULT_NAMESPACE", "app", "load_kubeconfig"]
