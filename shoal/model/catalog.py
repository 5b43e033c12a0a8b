"""Every stored kind as plain data: its names, its scope and its table, without its model.

This is what front ends need to name and print a kind: the API group, the
kind name, the plural of its URLs, whether it is namespaced, the short names
people type and the table columns, like the printer columns of a Kubernetes
CustomResourceDefinition. It imports no pydantic model, so a command that
only lists objects starts fast; ``shoal.model.registry`` joins each entry to
its model class. It is the one place a kind's plural and scope are written: each
model reads them from here (``shoal.model.base.Kind``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One table column: a header, a dotted path into the object, an optional formatter name.

    A ``wide`` column is printed only with ``-o wide``, as kubectl's extra columns are.

    Formatters: ``age`` (of a timestamp; the full time with ``-o wide``), ``ref``
    (a ResourceRef as ``name`` or ``namespace/name``), ``weights`` (MetricRefs as
    ``name:weight``), ``section_url`` (``url`` of the section that ``type``
    names), ``rules``, ``fetch`` (a provider's last fetch), ``ms`` (seconds as
    milliseconds), ``failures`` (failed targets counted by reason), ``score`` (four
    decimals), ``cordoned`` (a cluster's state, ``,SchedulingDisabled`` when
    cordoned), ``nodes`` (ready/all of the observer's node totals), ``object`` (an
    event's involved object as ``kind/name``), ``mode`` (a cluster's, ``push`` when left
    out).
    """

    header: str
    path: str
    format: str = ""
    wide: bool = False  # only with ``-o wide``


@dataclass(frozen=True)
class Entry:
    """One kind: how its URLs and people name it, and how a table shows it."""

    api: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every name that designates the kind on a command line (lower case)."""
        return (self.plural, self.kind.lower(), *self.short_names)

    def collection_path(self, namespace: str | None = None) -> str:
        if self.namespaced and namespace is not None:
            return f"/{self.api}/namespaces/{namespace}/{self.plural}"
        return f"/{self.api}/{self.plural}"

    def item_path(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection_path(namespace if self.namespaced else None)}/{name}"

    def table(self, wide: bool = False) -> tuple[Column, ...]:
        """The columns (``wide`` ones too with ``wide``); a kind without its own has name
        (and namespace) and age."""
        if not self.columns:
            return (NAMESPACE, NAME, AGE) if self.namespaced else (NAME, AGE)
        return tuple(c for c in self.columns if wide or not c.wide)


NAME = Column("NAME", "metadata.name")
NAMESPACE = Column("NAMESPACE", "metadata.namespace")
AGE = Column("AGE", "metadata.created", "age")
LABELS = Column("LABELS", "metadata.labels")
STATE = Column("STATE", "status.state")
SCHEDULED_TO = Column("SCHEDULED_TO", "status.scheduled_to", "ref")
TYPE = Column("TYPE", "spec.type")
URL = Column("URL", "spec", "section_url")

_METRIC = (
    NAME,
    Column("MIN", "spec.min"),
    Column("MAX", "spec.max"),
    Column("PROVIDER", "spec.provider.name"),
    Column("METRIC", "spec.provider.metric"),
    Column("ALLOWED", "spec.allowed_values"),
    AGE,
)
_PROVIDER = (
    NAME,
    TYPE,
    URL,
    Column("STATUS", "status", "fetch"),
    Column("LAST_FETCH", "status.last_fetch", "age"),
    Column("LATENCY", "status.fetch_latency_seconds", "ms"),
    AGE,
)
_ROLE = (NAME, Column("RULES", "rules", "rules"), AGE)
_CLOUD = (
    NAME,
    TYPE,
    URL,
    STATE,
    LABELS,
    Column("METRICS", "spec.openstack.metrics", "weights"),
    AGE,
)

_INFRASTRUCTURE_PROVIDER = (NAME, TYPE, URL, AGE)

CATALOG: tuple[Entry, ...] = (
    Entry("core", "GlobalMetric", "globalmetrics", False, ("gm",), _METRIC),
    Entry("core", "Metric", "metrics", True, ("m",), _METRIC),
    Entry("core", "GlobalMetricsProvider", "globalmetricsproviders", False, ("gmp",), _PROVIDER),
    Entry(
        "core", "MetricsProvider", "metricsproviders", True, ("mp",), (NAMESPACE, *_PROVIDER)
    ),
    Entry("core", "Role", "roles", False, ("role",), _ROLE),
    Entry(
        "core",
        "RoleBinding",
        "rolebindings",
        False,
        ("rolebinding", "rb"),
        (NAME, Column("USERS", "users"), Column("ROLES", "roles"), AGE),
    ),
    Entry(
        "kubernetes",
        "Application",
        "applications",
        True,
        ("app", "apps"),
        (
            NAMESPACE,
            NAME,
            STATE,
            SCHEDULED_TO,
            Column("RUNNING_ON", "status.running_on", "ref"),
            Column("REASON", "status.reason.code"),
            AGE,
            Column("SCORE", "status.scheduling.score", "score", wide=True),
            Column("PLACEMENTS", "status.placements", "placements", wide=True),
            Column("ATTEMPTS", "status.scheduler_attempts", wide=True),
            Column("PLACED", "status.scheduled", "age", wide=True),
            Column("LABELS", "metadata.labels", wide=True),
            Column("CONDITIONS", "status.conditions", "degraded", wide=True),
        ),
    ),
    Entry(
        "kubernetes",
        "Cluster",
        "clusters",
        True,
        ("cluster",),
        (
            NAME,
            Column("STATE", "status.state", "cordoned"),
            LABELS,
            Column("METRICS", "spec.metrics", "weights"),
            SCHEDULED_TO,
            AGE,
            Column("NODES", "status.node_summary", "nodes", wide=True),
            Column("CUSTOM_RESOURCES", "spec.custom_resources", wide=True),
            Column("MODE", "spec.mode", "mode", wide=True),
            Column("AGENT", "status.agent_version", wide=True),
            Column("HEARTBEAT", "status.heartbeat", "age", wide=True),
        ),
    ),
    Entry(
        "kubernetes",
        "Copy",
        "copies",
        True,
        ("copy",),
        (
            NAMESPACE,
            NAME,
            Column("APPLICATION", "spec.app_name"),
            Column("CLUSTER", "spec.cluster", "ref"),
            Column("GENERATION", "spec.generation"),
            Column("ANSWERED", "status.generation"),
            Column("READY", "status.ready"),
            Column("REPLICAS", "status.ready_replicas"),
            Column("REASON", "status.reason.code"),
            AGE,
        ),
    ),
    Entry("infrastructure", "GlobalCloud", "globalclouds", False, ("gc",), _CLOUD),
    Entry("infrastructure", "Cloud", "clouds", True, ("cloud",), _CLOUD),
    Entry(
        "infrastructure",
        "GlobalInfrastructureProvider",
        "globalinfrastructureproviders",
        False,
        ("gip",),
        _INFRASTRUCTURE_PROVIDER,
    ),
    Entry(
        "infrastructure",
        "InfrastructureProvider",
        "infrastructureproviders",
        True,
        ("ip",),
        (NAMESPACE, *_INFRASTRUCTURE_PROVIDER),
    ),
    Entry("core", "Lease", "leases", False),
    Entry(
        "core",
        "Event",
        "events",
        True,
        ("ev",),
        (
            NAMESPACE,
            Column("LAST_SEEN", "last_timestamp", "age"),
            Column("TYPE", "type"),
            Column("REASON", "reason"),
            Column("OBJECT", "involved_object", "object"),
            Column("COUNT", "count"),
            Column("FROM", "reporting_component"),
            Column("MESSAGE", "message"),
        ),
    ),
    Entry(
        "scheduling",
        "RescheduleTask",
        "rescheduletasks",
        False,
        (),
        (
            NAME,
            Column("PHASE", "status.phase"),
            Column("TARGETS", "status.total"),
            Column("SUCCESSFUL", "status.successful"),
            Column("FAILED", "status.failed"),
            Column("PENDING", "status.pending"),
            Column("REASONS", "status.targets", "failures"),
            Column("FINISHED", "status.finish_time", "age"),
            AGE,
        ),
    ),
    Entry(
        "scheduling",
        "SchedulerConfiguration",
        "schedulerconfigurations",
        False,
        ("schedconf",),
        (
            NAME,
            Column("FILTERS", "spec.plugins.filters"),
            Column("SCORES", "spec.plugins.scores"),
            Column("STICKINESS", "spec.stickiness"),
            AGE,
        ),
    ),
    Entry(
        "scheduling",
        "Pod",
        "pods",
        True,
        ("pod", "po"),
        (
            NAMESPACE,
            NAME,
            Column("PHASE", "status.phase"),
            Column("CLUSTER", "status.cluster"),
            Column("NODE", "status.node"),
            Column("ATTEMPTS", "status.attempts"),
            Column("REASON", "status.reason"),
            AGE,
        ),
    ),
)

BY_KIND: dict[tuple[str, str], Entry] = {(e.api, e.kind): e for e in CATALOG}


def entry_of(api: str, kind: str) -> Entry:
    return BY_KIND[(api, kind)]
