"""The table of every kind's commands (lookup by name is ``shoal.cli.names``).

The table is data in the manner of kubectl's resource builder: for each kind,
where its commands live (``shoal core gm``), which verbs create or update it,
and which flags fill which field. ``shoal.cli.commands`` turns every entry into
``create``/``update``/``list``/``get``/``delete`` commands; a new kind needs
an entry here, its model and its registry entry, nothing else.
"""

from __future__ import annotations

from typing import Any

from shoal.cli.core_kinds import CORE
from shoal.cli.entries import (
    BOTH,
    CREATE,
    GLOBAL_METRIC_UPDATE_HELP,
    LABEL,
    METRIC_UPDATE_HELP,
    UPDATE,
    KindCommands,
    Verb,
    changed,
    flag,
    label,
    set_metrics,
)
from shoal.cli.podspec import POD_FLAGS, pod_spec
from shoal.model.base import Kind
from shoal.model.copies import Copy
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import Application, Cluster
from shoal.model.pods import Pod

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
    verbs = (register, changed(kind))
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
    *CORE,
    _cloud(GlobalCloud, "gc", ("globalcloud",), "global clouds"),
    _cloud(Cloud, "cloud", (), "clouds"),
    POD,
)

BY_KIND: dict[type[Kind], KindCommands] = {entry.kind: entry for entry in TABLE}
