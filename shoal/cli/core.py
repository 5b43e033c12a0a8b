"""``shoal core``: metrics, metrics providers, roles and role bindings (``rok core``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from shoal.cli.common import (
    AGE,
    NAME,
    NAMESPACE,
    CliError,
    Column,
    Output,
    add_read_commands,
    apply_labels,
    create_object,
    namespace_option,
    new_group,
    new_object,
    output_option,
    parse_labels,
    parse_pairs,
    provider_url,
    register_columns,
    update_object,
)
from shoal.model.base import Kind
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    Role,
    RoleBinding,
)

app = new_group("Metrics, metrics providers, roles and role bindings (group core).")

LABEL_HELP = "Label KEY=VALUE (repeatable; on update KEY- removes it)."
PROVIDER_TYPES = ("prometheus", "influx", "kafka", "static")


# metrics -------------------------------------------------------------------------


def _allowed_values(values: list[str] | None) -> list[float] | None:
    """``--allowed-values 1 2 3`` or ``--allowed-values 1,2,3``."""
    if not values:
        return None
    numbers = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                numbers.append(float(part))
            except ValueError:
                raise CliError(f"--allowed-values: {part!r} is not a number") from None
    return numbers


def _change_metric(
    data: dict[str, Any],
    *,
    labels: list[str] | None,
    min_: float | None,
    max_: float | None,
    provider: str | None,
    metric_name: str | None,
    allowed_values: list[str] | None,
) -> None:
    apply_labels(data["metadata"], parse_labels(labels))
    spec = data.setdefault("spec", {})
    if min_ is not None:
        spec["min"] = min_
    if max_ is not None:
        spec["max"] = max_
    ref = spec.setdefault("provider", {})
    if provider is not None:
        ref["name"] = provider
    if metric_name is not None:
        ref["metric"] = metric_name
    allowed = _allowed_values(allowed_values)
    if allowed is not None:
        spec["allowed_values"] = allowed


def metric_commands(kind: type[Kind], what: str) -> typer.Typer:
    group = new_group(f"{what.capitalize()}: create, list, get, update, delete.")
    hide_ns = not kind.namespaced

    @group.command("create", help=f"Create a {kind.kind_name()}.")
    def create(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Name of the metric in Shoal."),
        min_: float = typer.Option(..., "--min", help="Lowest valid value."),
        max_: float = typer.Option(..., "--max", help="Highest valid value."),
        provider: str = typer.Option(..., "--mp-name", help="Name of the metrics provider."),
        metric_name: str = typer.Option(
            ..., "--metric-name", help="Name of the metric inside the provider."
        ),
        allowed_values: list[str] | None = typer.Option(
            None, "--allowed-values", help="Only these values are valid: --allowed-values 1 2 3."
        ),
        namespace: str = typer.Option("default", "-n", "--namespace", hidden=hide_ns),
        labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
        output: Output = output_option(),
    ) -> None:
        data = new_object(kind, name, namespace, {})
        data["spec"] = {}
        _change_metric(
            data,
            labels=labels,
            min_=min_,
            max_=max_,
            provider=provider,
            metric_name=metric_name,
            allowed_values=allowed_values,
        )
        create_object(ctx, data, kind, output)

    @group.command("update", help=f"Change a {kind.kind_name()}: only given flags change it.")
    def update(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Name of the metric in Shoal."),
        min_: float | None = typer.Option(None, "--min", help="Lowest valid value."),
        max_: float | None = typer.Option(None, "--max", help="Highest valid value."),
        provider: str | None = typer.Option(None, "--mp-name", help="Metrics provider."),
        metric_name: str | None = typer.Option(None, "--metric-name", help="Name in provider."),
        allowed_values: list[str] | None = typer.Option(
            None, "--allowed-values", help="Replaces the allowed values."
        ),
        namespace: str = typer.Option("default", "-n", "--namespace", hidden=hide_ns),
        labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
        output: Output = output_option(),
    ) -> None:
        def change(data: dict[str, Any]) -> None:
            _change_metric(
                data,
                labels=labels,
                min_=min_,
                max_=max_,
                provider=provider,
                metric_name=metric_name,
                allowed_values=allowed_values,
            )

        update_object(ctx, kind, name, namespace, change, output)

    add_read_commands(group, kind, what)
    return group


# metrics providers ------------------------------------------------------------------


def _provider_section(spec: dict[str, Any], ptype: str | None, options: dict[str, Any]) -> None:
    """Put the given type-specific options into ``spec[type]``; a new type starts afresh."""
    old = spec.get("type")
    if ptype is not None and ptype != old:
        for other in PROVIDER_TYPES:
            spec.pop(other, None)
        spec["type"] = ptype
    current = str(spec.get("type"))
    section = dict(spec.get(current) or {})
    given = {key: value for key, value in options.items() if value is not None}
    wrong = {
        "prometheus": {
            "token",
            "org",
            "bucket",
            "version",
            "database",
            "username",
            "password",
            "table",
            "comparison_column",
            "value_column",
            "metrics",
        },
        "influx": {"table", "comparison_column", "value_column", "metrics"},
        "kafka": {
            "token",
            "org",
            "bucket",
            "version",
            "database",
            "username",
            "password",
            "metrics",
        },
        "static": {
            "url",
            "token",
            "org",
            "bucket",
            "version",
            "database",
            "username",
            "password",
            "table",
            "comparison_column",
            "value_column",
        },
    }.get(current, set())
    misplaced = sorted(set(given) & wrong)
    if misplaced:
        flags = ", ".join(
            "--"
            + m.replace("_", "-").replace("version", "influx-version").replace("metrics", "metric")
            for m in misplaced
        )
        raise CliError(f"{flags} do(es) not apply to a {current} provider")
    if "metrics" in given:
        section["metrics"] = dict(given.pop("metrics"))
    section.update(given)
    spec[current] = section


def provider_commands(kind: type[Kind], what: str) -> typer.Typer:
    group = new_group(f"{what.capitalize()}: create, list, get, update, delete.")
    hide_ns = not kind.namespaced

    def options(
        url: str | None,
        token: str | None,
        org: str | None,
        bucket: str | None,
        influx_version: int | None,
        database: str | None,
        username: str | None,
        password: str | None,
        table: str | None,
        comparison_column: str | None,
        value_column: str | None,
        metrics: list[str] | None,
    ) -> dict[str, Any]:
        if influx_version not in (None, 1, 2):
            raise CliError("--influx-version must be 1 or 2")
        pairs = parse_pairs(metrics, "--metric") if metrics else None
        return {
            "url": url,
            "token": token,
            "org": org,
            "bucket": bucket,
            "version": influx_version,
            "database": database,
            "username": username,
            "password": password,
            "table": table,
            "comparison_column": comparison_column,
            "value_column": value_column,
            "metrics": pairs,
        }

    @group.command("create", help=f"Create a {kind.kind_name()}.")
    def create(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Provider name."),
        ptype: str = typer.Option(..., "--type", help="prometheus, influx, kafka or static."),
        url: str | None = typer.Option(None, "--url", help="URL of the provider."),
        token: str | None = typer.Option(None, "--token", help="InfluxDB 2 token."),
        org: str | None = typer.Option(None, "--org", help="InfluxDB 2 organisation."),
        bucket: str | None = typer.Option(None, "--bucket", help="InfluxDB 2 bucket."),
        influx_version: int | None = typer.Option(
            None, "--influx-version", help="InfluxDB version: 2 (default) or 1."
        ),
        database: str | None = typer.Option(None, "--database", help="InfluxDB 1.x database."),
        username: str | None = typer.Option(None, "--username", help="InfluxDB 1.x user."),
        password: str | None = typer.Option(None, "--password", help="InfluxDB 1.x password."),
        table: str | None = typer.Option(None, "--table", help="Kafka/ksqlDB table."),
        comparison_column: str | None = typer.Option(
            None, "--comparison-column", help="ksqlDB column holding the metric name."
        ),
        value_column: str | None = typer.Option(
            None, "--value-column", help="ksqlDB column holding the value."
        ),
        metrics: list[str] | None = typer.Option(
            None, "--metric", help="Static metric: --metric NAME VALUE (repeatable)."
        ),
        namespace: str = typer.Option("default", "-n", "--namespace", hidden=hide_ns),
        labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
        output: Output = output_option(),
    ) -> None:
        if ptype not in PROVIDER_TYPES:
            raise CliError(f"--type must be one of {', '.join(PROVIDER_TYPES)}, not {ptype!r}")
        given = options(
            url,
            token,
            org,
            bucket,
            influx_version,
            database,
            username,
            password,
            table,
            comparison_column,
            value_column,
            metrics,
        )
        data = new_object(kind, name, namespace, parse_labels(labels))
        data["spec"] = {}
        _provider_section(data["spec"], ptype, given)
        create_object(ctx, data, kind, output)

    @group.command("update", help=f"Change a {kind.kind_name()}: only given flags change it.")
    def update(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Provider name."),
        ptype: str | None = typer.Option(None, "--type", help="New type (starts afresh)."),
        url: str | None = typer.Option(None, "--url"),
        token: str | None = typer.Option(None, "--token"),
        org: str | None = typer.Option(None, "--org"),
        bucket: str | None = typer.Option(None, "--bucket"),
        influx_version: int | None = typer.Option(None, "--influx-version"),
        database: str | None = typer.Option(None, "--database"),
        username: str | None = typer.Option(None, "--username"),
        password: str | None = typer.Option(None, "--password"),
        table: str | None = typer.Option(None, "--table"),
        comparison_column: str | None = typer.Option(None, "--comparison-column"),
        value_column: str | None = typer.Option(None, "--value-column"),
        metrics: list[str] | None = typer.Option(
            None, "--metric", help="Static metrics (replace all): --metric NAME VALUE."
        ),
        namespace: str = typer.Option("default", "-n", "--namespace", hidden=hide_ns),
        labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
        output: Output = output_option(),
    ) -> None:
        if ptype is not None and ptype not in PROVIDER_TYPES:
            raise CliError(f"--type must be one of {', '.join(PROVIDER_TYPES)}, not {ptype!r}")
        given = options(
            url,
            token,
            org,
            bucket,
            influx_version,
            database,
            username,
            password,
            table,
            comparison_column,
            value_column,
            metrics,
        )
        new_labels = parse_labels(labels)

        def change(data: dict[str, Any]) -> None:
            apply_labels(data["metadata"], new_labels)
            _provider_section(data.setdefault("spec", {}), ptype, given)

        update_object(ctx, kind, name, namespace, change, output)

    add_read_commands(group, kind, what)
    return group


# roles and role bindings -----------------------------------------------------------


def parse_rule(text: str) -> dict[str, Any]:
    """``api:resources:namespaces:verbs``, lists comma-separated, empty or ``*`` = any."""
    parts = text.split(":")
    if len(parts) != 4:
        raise CliError(
            f"rule {text!r} must be api:resources:namespaces:verbs "
            "(lists comma-separated, empty or * for any), e.g. kubernetes:applications::get,list"
        )

    def items(part: str) -> list[str]:
        return [p for p in part.split(",") if p and p != "*"]

    api = parts[0] if parts[0] != "*" else ""
    return {
        "api": api,
        "resources": items(parts[1]),
        "namespaces": items(parts[2]),
        "verbs": items(parts[3]),
    }


roles = new_group("Roles: create, list, get, update, delete.")


@roles.command("create")
def role_create(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Role name."),
    rules: list[str] | None = typer.Option(
        None, "--rule", help="Rule api:resources:namespaces:verbs (repeatable)."
    ),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    output: Output = output_option(),
) -> None:
    """Create a role."""
    data = new_object(Role, name, None, parse_labels(labels))
    data["rules"] = [parse_rule(rule) for rule in rules or ()]
    create_object(ctx, data, Role, output)


@roles.command("update")
def role_update(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Role name."),
    rules: list[str] | None = typer.Option(None, "--rule", help="Rules (replace all)."),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    output: Output = output_option(),
) -> None:
    """Change a role."""
    parsed = [parse_rule(rule) for rule in rules or ()]
    new_labels = parse_labels(labels)

    def change(data: dict[str, Any]) -> None:
        apply_labels(data["metadata"], new_labels)
        if parsed:
            data["rules"] = parsed

    update_object(ctx, Role, name, None, change, output)


add_read_commands(roles, Role, "roles")

bindings = new_group("Role bindings: create, list, get, update, delete.")


def _change_binding(
    users: list[str] | None, role_names: list[str] | None, labels: list[str] | None
) -> Callable[[dict[str, Any]], None]:
    new_labels = parse_labels(labels)

    def change(data: dict[str, Any]) -> None:
        apply_labels(data["metadata"], new_labels)
        if users:
            data["users"] = list(users)
        if role_names:
            data["roles"] = list(role_names)

    return change


@bindings.command("create")
def rolebinding_create(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Role binding name."),
    users: list[str] | None = typer.Option(None, "--user", help="User (repeatable)."),
    role_names: list[str] | None = typer.Option(None, "--role", help="Role (repeatable)."),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    output: Output = output_option(),
) -> None:
    """Bind roles to users."""
    data = new_object(RoleBinding, name, None, {})
    data.update({"users": [], "roles": []})
    _change_binding(users, role_names, labels)(data)
    create_object(ctx, data, RoleBinding, output)


@bindings.command("update")
def rolebinding_update(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Role binding name."),
    users: list[str] | None = typer.Option(None, "--user", help="Users (replace all)."),
    role_names: list[str] | None = typer.Option(None, "--role", help="Roles (replace all)."),
    labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
    output: Output = output_option(),
) -> None:
    """Change a role binding."""
    update_object(ctx, RoleBinding, name, None, _change_binding(users, role_names, labels), output)


add_read_commands(bindings, RoleBinding, "role bindings")


def _provider_status(obj: dict[str, Any]) -> str | None:
    """``OK``, or the reason code with the consecutive failed fetches; None before a fetch."""
    status = obj.get("status") or {}
    if not status.get("last_fetch"):
        return None
    code = (status.get("reason") or {}).get("code")
    if code:
        return f"{code}({status.get('errors', 0)})"
    return "OK"


def _latency(obj: dict[str, Any]) -> str | None:
    seconds = (obj.get("status") or {}).get("fetch_latency_seconds")
    return None if seconds is None else f"{seconds * 1000:.0f}ms"


_PROVIDER_STATUS_COLUMNS = [
    Column("TYPE", "spec.type"),
    Column("URL", provider_url),
    Column("STATUS", _provider_status),
    Column("LAST_FETCH", "status.last_fetch"),
    Column("LATENCY", _latency),
    AGE,
]
register_columns(GlobalMetricsProvider, [NAME, *_PROVIDER_STATUS_COLUMNS])
register_columns(MetricsProvider, [NAMESPACE, NAME, *_PROVIDER_STATUS_COLUMNS])

_groups = {
    "gm": (metric_commands(GlobalMetric, "global metrics"), "globalmetric"),
    "m": (metric_commands(Metric, "metrics"), "metric"),
    "gmp": (
        provider_commands(GlobalMetricsProvider, "global metrics providers"),
        "globalmetricsprovider",
    ),
    "mp": (provider_commands(MetricsProvider, "metrics providers"), "metricsprovider"),
    "role": (roles, "roles"),
    "rolebinding": (bindings, "rolebindings"),
}
for _short, (_group, _long) in _groups.items():
    app.add_typer(_group, name=_short)
    app.add_typer(_group, name=_long, hidden=True)

__all__ = ["app", "metric_commands", "namespace_option", "parse_rule", "provider_commands"]
