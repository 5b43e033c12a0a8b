"""Every stored kind, looked up by API group and plural or by kind name.

Beside the model class, each kind has the data that describes it to people:
short names and table columns, like the printer columns of a Kubernetes
CustomResourceDefinition. A column names a dotted JSON path and, where a raw
value would read badly, a formatter by name; the formatters themselves belong
to whoever prints (the CLI), so this layer stays free of any front end.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.model.base import Kind
from shoal.model.coordination import Lease
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    Role,
    RoleBinding,
)
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import Application, Cluster
from shoal.model.scheduling import RescheduleTask


@dataclass(frozen=True)
class Column:
    """One table column: a header, a dotted path into the object, an optional formatter name.

    Formatters: ``age`` (of a timestamp), ``ref`` (a ResourceRef as ``name`` or
    ``namespace/name``), ``weights`` (MetricRefs as ``name:weight``),
    ``section_url`` (``url`` of the section that ``type`` names), ``rules``,
    ``fetch`` (a provider's last fetch), ``ms`` (seconds as milliseconds),
    ``failures`` (failed targets counted by reason).
    """

    header: str
    path: str
    format: str = ""


@dataclass(frozen=True)
class Resource:
    """What describes a kind beyond its model: the names people type and its table."""

    kind: type[Kind]
    short_names: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()


NAME = Column("NAME", "metadata.name")
NAMESPACE = Column("NAMESPACE", "metadata.namespace")
AGE = Column("AGE", "metadata.created", "age")
LABELS = Column("LABELS", "metadata.labels")
STATE = Column("STATE", "status.state")
SCHEDULED_TO = Column("SCHEDULED_TO", "status.scheduled_to", "ref")
TYPE = Column("TYPE", "spec.type")
URL = Column("URL", "spec", "section_url")

_METRIC = (
    Column("MIN", "spec.min"),
    Column("MAX", "spec.max"),
    Column("PROVIDER", "spec.provider.name"),
    Column("METRIC", "spec.provider.metric"),
    Column("ALLOWED", "spec.allowed_values"),
    AGE,
)
_PROVIDER = (
    TYPE,
    URL,
    Column("STATUS", "status", "fetch"),
    Column("LAST_FETCH", "status.last_fetch"),
    Column("LATENCY", "status.fetch_latency_seconds", "ms"),
    AGE,
)
_CLOUD = (
    TYPE,
    URL,
    STATE,
    LABELS,
    Column("METRICS", "spec.openstack.metrics", "weights"),
    AGE,
)

RESOURCES: dict[type[Kind], Resource] = {
    r.kind: r
    for r in (
        Resource(GlobalMetric, ("gm",), (NAME, *_METRIC)),
        Resource(Metric, ("m",), (NAME, *_METRIC)),
        Resource(GlobalMetricsProvider, ("gmp",), (NAME, *_PROVIDER)),
        Resource(MetricsProvider, ("mp",), (NAMESPACE, NAME, *_PROVIDER)),
        Resource(Role, ("role",), (NAME, Column("RULES", "rules", "rules"), AGE)),
        Resource(
            RoleBinding,
            ("rolebinding", "rb"),
            (NAME, Column("USERS", "users"), Column("ROLES", "roles"), AGE),
        ),
        Resource(
            Application,
            ("app", "apps"),
            (
                NAMESPACE,
                NAME,
                STATE,
                SCHEDULED_TO,
                Column("RUNNING_ON", "status.running_on", "ref"),
                Column("REASON", "status.reason.code"),
                AGE,
            ),
        ),
        Resource(
            Cluster,
            ("cluster",),
            (NAME, STATE, LABELS, Column("METRICS", "spec.metrics", "weights"), SCHEDULED_TO, AGE),
        ),
        Resource(GlobalCloud, ("gc",), (NAME, *_CLOUD)),
        Resource(Cloud, ("cloud",), (NAME, *_CLOUD)),
        Resource(Lease),
        Resource(
            RescheduleTask,
            (),
            (
                NAME,
                Column("PHASE", "status.phase"),
                Column("TARGETS", "status.total"),
                Column("SUCCESSFUL", "status.successful"),
                Column("FAILED", "status.failed"),
                Column("PENDING", "status.pending"),
                Column("REASONS", "status.targets", "failures"),
                Column("FINISHED", "status.finish_time"),
                AGE,
            ),
        ),
    )
}

KINDS: tuple[type[Kind], ...] = tuple(RESOURCES)


def register(kind: type[Kind], resource: Resource | None = None) -> type[Kind]:
    """Add a kind defined outside this module (later API groups) to the registry."""
    global KINDS
    RESOURCES[kind] = resource or RESOURCES.get(kind) or Resource(kind)
    if kind not in KINDS:
        KINDS = (*KINDS, kind)
        BY_PLURAL[(kind.api_name(), kind.plural)] = kind
        BY_KIND[(kind.api_name(), kind.kind_name())] = kind
    return kind


BY_PLURAL: dict[tuple[str, str], type[Kind]] = {(k.api_name(), k.plural): k for k in KINDS}
BY_KIND: dict[tuple[str, str], type[Kind]] = {(k.api_name(), k.kind_name()): k for k in KINDS}


def kind_for(api: str, kind: str) -> type[Kind]:
    try:
        return BY_KIND[(api, kind)]
    except KeyError:
        raise KeyError(f"unknown kind {api}/{kind}") from None


def resource_of(kind: type[Kind]) -> Resource:
    """The description of ``kind``; kinds without one get name (and namespace) and age."""
    found = RESOURCES.get(kind)
    if found is not None and found.columns:
        return found
    columns = (NAMESPACE, NAME, AGE) if kind.namespaced else (NAME, AGE)
    return Resource(kind, found.short_names if found else (), columns)
