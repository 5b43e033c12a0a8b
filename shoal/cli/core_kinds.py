"""The ``core`` group's rows of the table of kinds' commands: metrics, metrics providers,
roles and role bindings (``shoal core …``).
"""

from __future__ import annotations

from typing import Any, get_args

from shoal.cli.entries import (
    LABEL,
    UPDATE,
    KindCommands,
    changed,
    created,
    flag,
)
from shoal.cli.errors import CliError, did_you_mean
from shoal.model.base import Kind
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    MetricsProviderSpec,
    Role,
    RoleBinding,
)

# metrics and metrics providers ------------------------------------------------------

METRIC_FLAGS = (
    flag("--min", "spec.min", "Lowest valid value.", float, required=True),
    flag("--max", "spec.max", "Highest valid value.", float, required=True),
    flag(
        "--mp-name",
        "spec.provider.name",
        "Name of the metrics provider.",
        required=True,
        update_help="Metrics provider.",
    ),
    flag(
        "--metric-name",
        "spec.provider.metric",
        "Name of the metric inside the provider.",
        required=True,
        update_help="Name in provider.",
    ),
    flag(
        "--allowed-values",
        "spec.allowed_values",
        "Only these values are valid: --allowed-values 1 2 3.",
        many=True,
        read="numbers",
        update_help="Replaces the allowed values.",
    ),
    LABEL,
)

PROVIDER_TYPES: tuple[str, ...] = get_args(MetricsProviderSpec.model_fields["type"].annotation)
SECTION_FIELDS: dict[str, set[str]] = {
    t: set(get_args(MetricsProviderSpec.model_fields[t].annotation)[0].model_fields)
    for t in PROVIDER_TYPES
}
"""The fields each provider type's section has: the flags that apply to it."""


def provider_section(entry: KindCommands, data: dict[str, Any]) -> None:
    """Move the staged section flags into ``spec[type]``; a new type starts afresh."""
    spec = data.setdefault("spec", {})
    given = dict(spec.pop("section", None) or {})
    ptype = given.pop("type", None)
    if ptype is not None and ptype not in PROVIDER_TYPES:
        raise CliError(f"--type must be one of {', '.join(PROVIDER_TYPES)}, not {ptype!r}")
    if given.get("version") not in (None, 1, 2):
        raise CliError("--influx-version must be 1 or 2")
    if ptype is not None and ptype != spec.get("type"):
        for other in PROVIDER_TYPES:
            spec.pop(other, None)
        spec["type"] = ptype
    current = str(spec.get("type"))
    edits = {k: given.pop(k) for k in ("set_metrics", "unset_metrics") if k in given}
    misplaced = sorted(set(given) - SECTION_FIELDS.get(current, set(given)))
    if misplaced:
        names = {f.path.rpartition(".")[2]: f.long for f in entry.flags}
        flags = ", ".join(names[m] for m in misplaced)
        raise CliError(f"{flags} do(es) not apply to a {current} provider")
    spec[current] = {**(spec.get(current) or {}), **given}
    if edits:
        _edit_metrics(current, spec[current], edits)


def _edit_metrics(ptype: str, section: dict[str, Any], edits: dict[str, Any]) -> None:
    """``--set-metric``/``--unset-metric``: change single values of a static provider."""
    if ptype != "static":
        raise CliError(f"--set-metric and --unset-metric apply to a static provider, not {ptype}")
    metrics = {**(section.get("metrics") or {}), **(edits.get("set_metrics") or {})}
    for name in edits.get("unset_metrics") or ():
        if metrics.pop(name, None) is None:
            hint = did_you_mean(name, metrics)
            raise CliError(f"--unset-metric: the provider has no metric {name!r}{hint}")
    section["metrics"] = metrics


PROVIDER_FLAGS = (
    flag(
        "--type",
        "spec.section.type",
        "prometheus, influx, kafka or static.",
        required=True,
        update_help="New type (starts afresh).",
    ),
    *(
        flag(f"--{name}", f"spec.section.{field_}", help, type_, update_help="")
        for name, field_, help, type_ in (
            ("url", "url", "URL of the provider.", str),
            ("token", "token", "InfluxDB 2 token.", str),
            ("org", "org", "InfluxDB 2 organisation.", str),
            ("bucket", "bucket", "InfluxDB 2 bucket.", str),
            ("influx-version", "version", "InfluxDB version: 2 (default) or 1.", int),
            ("database", "database", "InfluxDB 1.x database.", str),
            ("username", "username", "InfluxDB 1.x user.", str),
            ("password", "password", "InfluxDB 1.x password.", str),
            ("table", "table", "Kafka/ksqlDB table.", str),
            (
                "comparison-column",
                "comparison_column",
                "ksqlDB column holding the metric name.",
                str,
            ),
            ("value-column", "value_column", "ksqlDB column holding the value.", str),
        )
    ),
    flag(
        "--metric",
        "spec.section.metrics",
        "Static metric: --metric NAME VALUE (repeatable).",
        many=True,
        read="pairs",
        update_help="Static metrics (replace all): --metric NAME VALUE.",
    ),
    *(
        flag(decls, f"spec.section.{field_}", help, many=True, read=read, verbs=UPDATE)
        for decls, field_, read, help in (
            ("--set-metric", "set_metrics", "pairs", "Set one static metric: NAME=VALUE."),
            ("--unset-metric", "unset_metrics", "", "Remove one static metric: NAME."),
        )
    ),
    LABEL,
)


def core_entry(
    kind: type[Kind], command: str, what: str, name_help: str, **more: Any
) -> KindCommands:
    """A kind of group ``core`` with ``create`` and ``update``; its long name is a hidden alias."""
    verbs = (created(kind), changed(kind))
    return KindCommands(
        kind, "core", command, what, name_help, verbs, aliases=(kind.plural[:-1],), **more
    )


# roles and role bindings -----------------------------------------------------------

ROLE = KindCommands(
    Role,
    "core",
    "role",
    "roles",
    "Role name.",
    (created(Role, "Create a role."), changed(Role, "Change a role.")),
    (
        flag(
            "--rule",
            "rules",
            "Rule api:resources:namespaces:verbs (repeatable).",
            many=True,
            read="rules",
            update_help="Rules (replace all).",
        ),
        LABEL,
    ),
    ("roles",),
    {"rules": []},
)
ROLE_BINDING = KindCommands(
    RoleBinding,
    "core",
    "rolebinding",
    "role bindings",
    "Role binding name.",
    (
        created(RoleBinding, "Bind roles to users."),
        changed(RoleBinding, "Change a role binding."),
    ),
    (
        flag(
            "--user", "users", "User (repeatable).", many=True, update_help="Users (replace all)."
        ),
        flag(
            "--role", "roles", "Role (repeatable).", many=True, update_help="Roles (replace all)."
        ),
        LABEL,
    ),
    ("rolebindings",),
    {"users": [], "roles": []},
)


#: The group's entries, in the order ``shoal core --help`` lists them.
CORE: tuple[KindCommands, ...] = (
    core_entry(
        GlobalMetric, "gm", "global metrics", "Name of the metric in Shoal.", flags=METRIC_FLAGS
    ),
    core_entry(Metric, "m", "metrics", "Name of the metric in Shoal.", flags=METRIC_FLAGS),
    core_entry(
        GlobalMetricsProvider,
        "gmp",
        "global metrics providers",
        "Provider name.",
        flags=PROVIDER_FLAGS,
        finish=provider_section,
    ),
    core_entry(
        MetricsProvider,
        "mp",
        "metrics providers",
        "Provider name.",
        flags=PROVIDER_FLAGS,
        finish=provider_section,
    ),
    ROLE,
    ROLE_BINDING,
)
