"""The table of every kind's commands (lookup by name is ``shoal.cli.names``).

The table is data in the manner of kubectl's resource builder: for each kind,
where its commands live (``shoal core gm``), which verbs create or update it,
and which flags fill which field. ``shoal.cli.commands`` turns every entry into
``create``/``update``/``list``/``get``/``delete`` commands; a new kind needs
an entry here, its model and its registry entry, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_args

from shoal.cli.errors import CliError, did_you_mean
from shoal.cli.podspec import POD_FLAGS, pod_spec
from shoal.model.base import Kind
from shoal.model.copies import Copy
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    MetricsProviderSpec,
    Role,
    RoleBinding,
)
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import Application, Cluster
from shoal.model.pods import Pod

# the table ---------------------------------------------------------------------

CREATE = ("create",)
UPDATE = ("update",)
BOTH = ("create", "update")


@dataclass(frozen=True)
class Flag:
    """One option and the field it fills.

    ``read`` names the reader in ``shoal.cli.inputs.READERS`` (labels merge into
    ``metadata.labels``; metric references of two flags join in one list). A
    flag with a ``value`` is a switch that sets it; two switches of one field
    exclude each other. An empty ``path`` marks a flag another flag's reader uses.
    """

    decls: tuple[str, ...]
    path: str
    help: str = ""
    type: type = str
    many: bool = False
    read: str = ""
    required: bool = False
    verbs: tuple[str, ...] = BOTH
    update_help: str | None = None
    value: Any = None

    @property
    def long(self) -> str:
        """The first long form, as messages name the flag (``--inherit-metrics``)."""
        return next(d for d in self.decls if d.startswith("--")).split("/")[0]

    @property
    def name(self) -> str:
        """The option's parameter name (``--mp-name``: ``mp_name``)."""
        return self.long.removeprefix("--").replace("-", "_")

    def help_for(self, verb: str) -> str:
        return self.help if verb != "update" or self.update_help is None else self.update_help


@dataclass(frozen=True)
class Verb:
    """A command that creates (``update=False``) or changes an object from flags."""

    name: str
    help: str
    update: bool = False
    name_help: str | None = None
    default_name: Callable[[dict[str, Any]], str] | None = None


@dataclass(frozen=True)
class KindCommands:
    """Everything the CLI needs to generate the commands of one kind."""

    kind: type[Kind]
    group: str
    command: str
    what: str
    name_help: str
    verbs: tuple[Verb, ...]
    flags: tuple[Flag, ...]
    aliases: tuple[str, ...] = ()
    initial: dict[str, Any] = field(default_factory=lambda: {"spec": {}})
    finish: Callable[[KindCommands, dict[str, Any]], None] | None = None

    def flags_of(self, verb: Verb) -> tuple[Flag, ...]:
        wanted = "update" if verb.update else verb.name
        return tuple(f for f in self.flags if wanted in f.verbs)


def flag(decls: str, path: str, help: str = "", type: type = str, **options: Any) -> Flag:
    """A table row: ``decls`` space-separated (``"-l --label"``)."""
    return Flag(tuple(decls.split()), path, help, type, **options)


def _created(kind: type[Kind], help: str | None = None) -> Verb:
    return Verb("create", help or f"Create a {kind.kind_name()}.")


def _changed(kind: type[Kind], help: str | None = None) -> Verb:
    return Verb("update", help or f"Change a {kind.kind_name()}: only given flags change it.", True)


def label(verbs: tuple[str, ...] = BOTH) -> Flag:
    help = "Label KEY=VALUE (repeatable; on update KEY- removes it)."
    return flag("-l --label", "metadata.labels", help, many=True, read="labels", verbs=verbs)


LABEL = label()

METRIC_UPDATE_HELP = (
    "Add a namespaced metric, or change its weight: --metric NAME WEIGHT (repeatable)."
)
GLOBAL_METRIC_UPDATE_HELP = (
    "Add a global metric, or change its weight: --global-metric NAME WEIGHT (repeatable)."
)


def set_metrics(path: str) -> Flag:
    """``--set-metrics``: the metrics given with it replace the list (none given: no metrics)."""
    help = "The given --metric/--global-metric replace every metric (alone: remove them all)."
    return flag("--set-metrics", path, help, read="set_metrics", value=[], verbs=UPDATE)

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


def _provider_section(entry: KindCommands, data: dict[str, Any]) -> None:
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


def _core(kind: type[Kind], command: str, what: str, name_help: str, **more: Any) -> KindCommands:
    """A kind of group ``core`` with ``create`` and ``update``; its long name is a hidden alias."""
    verbs = (_created(kind), _changed(kind))
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
    (_created(Role, "Create a role."), _changed(Role, "Change a role.")),
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
        _created(RoleBinding, "Bind roles to users."),
        _changed(RoleBinding, "Change a role binding."),
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

# clouds ------------------------------------------------------------------------

REGISTER = ("register", "update")
_AUTH = "spec.openstack.auth.password"
CLOUD_FLAGS = (
    *(
        flag(decls, path, help, required=required, verbs=REGISTER, update_help="")
        for decls, path, help, required in (
            ("--url", "spec.openstack.url", "Keystone (identity) URL.", True),
            ("--username --user", f"{_AUTH}.user.username", "OpenStack user.", True),
            ("--password", f"{_AUTH}.user.password", "OpenStack password.", True),
            ("--project", f"{_AUTH}.project.name", "OpenStack project name.", True),
            (
                "--user-domain-name",
                f"{_AUTH}.user.domain_name",
                "User domain (default: Default).",
                False,
            ),
            (
                "--project-domain-id",
                f"{_AUTH}.project.domain_id",
                "Project domain id (default: default).",
                False,
            ),
        )
    ),
    flag(
        "--metric",
        "spec.openstack.metrics",
        "Namespaced metric: --metric NAME WEIGHT (repeatable).",
        many=True,
        read="metric",
        verbs=REGISTER,
        update_help=METRIC_UPDATE_HELP,
    ),
    flag(
        "--global-metric",
        "spec.openstack.metrics",
        "Global metric: --global-metric NAME WEIGHT.",
        many=True,
        read="global_metric",
        verbs=REGISTER,
        update_help=GLOBAL_METRIC_UPDATE_HELP,
    ),
    set_metrics("spec.openstack.metrics"),
    flag(
        "--infrastructure-provider",
        "spec.openstack.infrastructure_provider",
        "Global infrastructure provider name.",
        read="global_ref",
        verbs=REGISTER,
        update_help="",
    ),
    label(REGISTER),
)


def _cloud(kind: type[Kind], command: str, aliases: tuple[str, ...], what: str) -> KindCommands:
    register = Verb("register", f"Register an OpenStack {kind.kind_name()}.")
    verbs = (register, _changed(kind))
    return KindCommands(kind, "infra", command, what, "Cloud name.", verbs, CLOUD_FLAGS, aliases)


# applications ------------------------------------------------------------------

LABEL_CONSTRAINT_HELP = "Cluster label constraint, e.g. 'location is DE' (repeatable)."
METRIC_CONSTRAINT_HELP = "Cluster metric constraint, e.g. 'load < 3' (repeatable)."
CR_HELP = "Custom resource '<plural>.<group>' the cluster must support (repeatable)."
CLUSTER_CONSTRAINTS = tuple(
    flag(
        decls,
        f"spec.constraints.cluster.{field_}",
        help,
        many=True,
        update_help=help + " Replaces.",
    )
    for decls, field_, help in (
        ("-L --cluster-label-constraint", "labels", LABEL_CONSTRAINT_HELP),
        ("-M --cluster-metric-constraint", "metrics", METRIC_CONSTRAINT_HELP),
        ("-R --cluster-resource-constraint", "custom_resources", CR_HELP),
    )
)
"""Also the flags of ``shoal kube app dryrun``."""

MANIFEST = flag(
    "-f --file",
    "spec.manifest",
    "Kubernetes manifest (several YAML documents allowed; - is stdin).",
    read="manifest",
    required=True,
    update_help="New Kubernetes manifest.",
)
_MIGRATION = "spec.constraints.migration"

APPLICATION = KindCommands(
    Application,
    "kube",
    "app",
    "applications",
    "Application name.",
    (
        Verb("create", "Create an application from a Kubernetes manifest."),
        Verb("update", "Change an application: only the given flags change it.", True),
    ),
    (
        MANIFEST,
        LABEL,
        *CLUSTER_CONSTRAINTS,
        flag(
            "--disable-migration",
            _MIGRATION,
            "Never migrate once placed.",
            bool,
            value=False,
            update_help="",
        ),
        flag("--enable-migration", _MIGRATION, "", bool, verbs=UPDATE, value=True),
        flag("--backoff", "spec.backoff", "Deploy retries: delay multiplier.", int),
        flag("--backoff-delay", "spec.backoff_delay", "Deploy retries: first delay (s).", int),
        flag("--backoff-limit", "spec.backoff_limit", "Deploy retries (-1: forever).", int),
        flag("--retry-limit", "spec.retry_limit", "Placement tries (-1 ∞; unset: scheduler)", int),
        flag("--retry-delay", "spec.retry_delay", "Placement retry s (unset: scheduler).", float),
        flag("--conflict-resolution", "spec.conflict_resolution", "abort or overwrite."),
        flag("-O --observer-schema", "spec.observer_schema",
             "Observer schema: the fields kept in step (YAML documents; docs/observer-schema.md).",
             read="manifest", update_help="New observer schema."),
        flag("--clusters", "spec.placement.clusters", "Run it on this many clusters.", int),
        flag("--spread-by", "spec.placement.spread_by",
             "Cluster label whose values the chosen clusters do not share."),
        flag("--replicas", "spec.placement.replicas",
             "divided (shared among the clusters) or duplicated (all on each)."),
        flag("--weights", "spec.placement.weights",
             "even, dynamic, or 'CONSTRAINT=WEIGHT' (repeatable): how divided replicas are "
             "shared.", many=True, read="weights"),
        flag("--fallback", "spec.placement.fallback",
             "Cluster group used only while those before cannot hold it (repeatable, in "
             "order).", many=True, update_help="Fallback groups (replaces)."),
        flag(
            "--hook",
            "spec.hooks",
            "Enable a hook: complete or shutdown (repeatable).",
            many=True,
            update_help="Hooks (replaces).",
        ),
    ),
    ("application",),
)

# clusters ----------------------------------------------------------------------

ALL = ("register", "create", "update")
METRIC_HELP = "Namespaced metric and its weight: --metric NAME WEIGHT (repeatable)."
GLOBAL_METRIC_HELP = "Global metric and its weight: --global-metric NAME WEIGHT (repeatable)."


def _kubeconfig_cluster(data: dict[str, Any]) -> str:
    return str(data["spec"]["kubeconfig"]["clusters"][0].get("name"))


CLUSTER = KindCommands(
    Cluster,
    "kube",
    "cluster",
    "clusters",
    "Cluster name.",
    (
        Verb(
            "register",
            "Register an existing Kubernetes cluster from its kubeconfig.",
            name_help="Cluster name (default: the kubeconfig context's cluster name).",
            default_name=_kubeconfig_cluster,
        ),
        Verb("create", "Create a cluster that Shoal places on a cloud (no kubeconfig yet)."),
        Verb("update", "Change a cluster: only the given flags change it.", True),
    ),
    (
        flag(
            "-k --kubeconfig",
            "spec.kubeconfig",
            "Kubeconfig file.",
            read="kubeconfig",
            required=True,
            verbs=REGISTER,
            update_help="New kubeconfig.",
        ),
        flag(
            "--context",
            "",
            "Context to take from a kubeconfig with several.",
            verbs=REGISTER,
            update_help="Context of the kubeconfig.",
        ),
        flag(
            "-f --file",
            "spec.tosca",
            "TOSCA template (YAML) describing the cluster.",
            read="yaml",
            verbs=BOTH,
            update_help="New TOSCA template: the cluster is changed in place (more nodes…).",
        ),
        label(ALL),
        flag(
            "-L --cloud-label-constraint --cloud-constraint",
            "spec.constraints.cloud.labels",
            "Cloud label constraint (repeatable).",
            many=True,
            update_help="Cloud label constraints (replaces).",
        ),
        flag(
            "-M --cloud-metric-constraint",
            "spec.constraints.cloud.metrics",
            "Cloud metric constraint (repeatable).",
            many=True,
            update_help="Cloud metric constraints (replaces).",
        ),
        flag(
            "--metric",
            "spec.metrics",
            METRIC_HELP,
            many=True,
            read="metric",
            verbs=ALL,
            update_help=METRIC_UPDATE_HELP,
        ),
        flag(
            "--global-metric",
            "spec.metrics",
            GLOBAL_METRIC_HELP,
            many=True,
            read="global_metric",
            verbs=ALL,
            update_help=GLOBAL_METRIC_UPDATE_HELP,
        ),
        set_metrics("spec.metrics"),
        flag(
            "-R --custom-resource",
            "spec.custom_resources",
            "CRD '<plural>.<group>' the cluster has.",
            many=True,
            verbs=ALL,
            update_help="CRDs (replaces).",
        ),
        flag(
            "--inherit-metrics",
            "spec.inherit_metrics",
            "Take the metrics of the cloud it runs on.",
            bool,
            verbs=("register", "create"),
            value=True,
        ),
        flag(
            "--inherit-metrics/--no-inherit-metrics",
            "spec.inherit_metrics",
            "Take the cloud's metrics.",
            bool,
            verbs=UPDATE,
        ),
    ),
)

# fleet pods (flags and how they make a spec: shoal.cli.podspec) ------------------

POD = KindCommands(
    Pod, "fleet", "pod", "fleet pods", "Pod name.",
    (Verb("create", "Create a pod for the fleet scheduler (from flags or a Kubernetes pod)."),),
    (*(flag(*row[:4], **row[4]) for row in POD_FLAGS), label(CREATE)), ("pods",), finish=pod_spec,
)

# copies of applications on pull clusters: written by the kube controller, read here ------

COPY = KindCommands(
    Copy, "kube", "copy", "copies of applications on pull clusters (written by Shoal)",
    "Copy name (<application>:<cluster>).", (), (), ("copies",),
)

# the table ---------------------------------------------------------------------

GROUPS: dict[str, str] = {
    "kube": "Applications and clusters (kubernetes).",
    "core": "Metrics, metrics providers, roles and role bindings (core).",
    "infra": "Clouds that clusters are created on (infrastructure).",
    "fleet": "Pods placed onto nodes across the fleet by cluster agents (scheduling).",
}
"""``shoal GROUP``: one per API group, as in Krake's ``rok``."""

TABLE: tuple[KindCommands, ...] = (
    APPLICATION,
    CLUSTER,
    COPY,
    _core(GlobalMetric, "gm", "global metrics", "Name of the metric in Shoal.", flags=METRIC_FLAGS),
    _core(Metric, "m", "metrics", "Name of the metric in Shoal.", flags=METRIC_FLAGS),
    _core(
        GlobalMetricsProvider,
        "gmp",
        "global metrics providers",
        "Provider name.",
        flags=PROVIDER_FLAGS,
        finish=_provider_section,
    ),
    _core(
        MetricsProvider,
        "mp",
        "metrics providers",
        "Provider name.",
        flags=PROVIDER_FLAGS,
        finish=_provider_section,
    ),
    ROLE,
    ROLE_BINDING,
    _cloud(GlobalCloud, "gc", ("globalcloud",), "global clouds"),
    _cloud(Cloud, "cloud", (), "clouds"),
    POD,
)

BY_KIND: dict[type[Kind], KindCommands] = {entry.kind: entry for entry in TABLE}
