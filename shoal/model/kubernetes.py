"""Group ``kubernetes``: applications and the member clusters they run on."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    field_validator,
)

from shoal.machinery.names import is_kube_namespace
from shoal.model.base import (
    Kind,
    Model,
    Reason,
    ResourceRef,
    StrEnumByName,
    null_as,
)
from shoal.model.constraints import (
    ClusterConstraintsOnCloud,
    Constraints,
    CustomResourceName,
    MetricRef,
)
from shoal.model.placement_spec import Placement
from shoal.model.shape import addition


class ApplicationSpec(Model):
    manifest: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Kubernetes objects; checked on create and update (shoal.model.validation).",
    )
    tosca: Annotated[dict[str, Any] | str, null_as(dict)] = Field(default_factory=dict)
    csar: str | None = None
    observer_schema: list[dict[str, Any]] = Field(default_factory=list)
    hooks: list[str] = Field(default_factory=list)
    constraints: Constraints = Field(default_factory=Constraints)
    backoff: int = Field(default=1, ge=0)
    backoff_delay: int = Field(default=1, ge=0)
    backoff_limit: int = Field(default=-1, ge=-1)
    shutdown_grace_time: int = Field(default=30, ge=0)
    retry_limit: int | None = addition(
        None,
        ge=-1,
        description="Failed placement attempts before FAILED; -1 never; unset: the "
        "scheduler's retries.",
    )
    retry_delay: float | None = addition(
        None,
        gt=0,
        description="Seconds before the first placement retry (then doubling); unset: the "
        "scheduler's backoff.initial.",
    )
    conflict_resolution: Literal["abort", "overwrite"] = addition(
        "abort",
        description="An object of the manifest that another application (or none) owns in"
        " the member cluster: abort (reason CONFLICT) or overwrite (take it over).",
    )
    placement: Placement | None = addition(
        None,
        description="Several clusters, and how replicas are shared (docs/multi-cluster.md); "
        "unset: one cluster.",
    )


class ApplicationState(StrEnumByName):
    PENDING = "PENDING"
    CREATING = "CREATING"
    RUNNING = "RUNNING"
    RECONCILING = "RECONCILING"
    MIGRATING = "MIGRATING"
    DELETING = "DELETING"
    DELETED = "DELETED"
    DEGRADED = "DEGRADED"
    FAILED = "FAILED"
    COMPLETED = "COMPLETED"
    WAITING_FOR_CLEANING = "WAITING_FOR_CLEANING"
    READY_FOR_ACTION = "READY_FOR_ACTION"
    # Krake's controllers may write these; Shoal's never do.
    TRANSLATING = "TRANSLATING"
    RETRYING = "RETRYING"
    RESTARTING = "RESTARTING"


# States an application is past scheduling in (the reschedule task controller skips them too).
INACTIVE_STATES = (
    ApplicationState.DELETING,
    ApplicationState.DELETED,
    ApplicationState.COMPLETED,
    ApplicationState.READY_FOR_ACTION,
    ApplicationState.WAITING_FOR_CLEANING,
)

AppKey = tuple[str, str]
"""(namespace, name) of an application."""


def _kube_namespace(value: str) -> str:
    if not is_kube_namespace(value):
        raise ValueError(f"{value!r} is not a Kubernetes namespace (a DNS-1123 label)")
    return value


KubeNamespace = Annotated[str, AfterValidator(_kube_namespace)]


class ContainerHealth(Model):
    desired_pods: int = 0
    running_pods: int = 0
    completed_pods: int = 0
    failed_pods: int = 0


class CopyStatus(Model):
    """What the kube controller applied on one cluster, and how it runs there."""

    cluster: ResourceRef
    replicas: int | None = Field(
        default=None, description="Its share of the replicas (None: the manifest's own)."
    )
    ready_replicas: int = 0
    state: ApplicationState | None = None
    reason: Reason | None = None


class Condition(Model):
    """Something true of an application now, and why (Kubernetes' conditions' shape)."""

    type: str = Field(description="``Degraded``: a placement runs short of what it asked.")
    status: Literal["True", "False"] = "True"
    reason: str = Field(default="", description="One word: ``PlacementShort``.")
    message: str = ""
    since: datetime | None = Field(default=None, description="When it became true.")


DEGRADED = "Degraded"
PLACEMENT_SHORT = "PlacementShort"


class PlacementStatus(CopyStatus):
    """One cluster of a placement: its share (scheduler), and how it runs there (the API
    copies ``ready_replicas``, ``state`` and ``reason`` from the cluster's copy)."""


class ApplicationStatus(Model):
    state: ApplicationState = ApplicationState.PENDING
    reason: Reason | None = None
    scheduled: datetime | None = None
    scheduled_to: ResourceRef | None = None
    running_on: ResourceRef | None = None
    kube_controller_triggered: datetime | None = None
    last_scheduled: datetime | None = addition(
        None, description="Last successful scheduling pass (Shoal addition)."
    )
    reschedule_requested: datetime | None = addition(
        None,
        description="A reschedule was asked for at this time; done when last_scheduled is later.",
    )
    scheduler_retries: int | None = addition(
        None, description="Attempts left before FAILED; set by the scheduler."
    )
    scheduling: dict[str, Any] | None = addition(
        None, description="Explanation of the last scheduling attempt (Shoal addition)."
    )
    # One writer per field (docs/status-ownership.md); state and reason derive from these.
    schedule_reason: Reason | None = addition(
        None, description="Why the scheduler cannot place it now (scheduler)."
    )
    scheduler_attempts: Annotated[int, null_as(int)] = addition(
        0, ge=0, description="Failed placement attempts in a row (scheduler)."
    )
    next_retry: datetime | None = addition(
        None, description="When the scheduler tries a waiting application again."
    )
    last_scheduled_to: ResourceRef | None = addition(
        None, description="The cluster it was last placed on (scheduler)."
    )
    deploy_state: ApplicationState | None = addition(
        None, description="Where the deployment is (kube controller)."
    )
    deploy_reason: Reason | None = addition(
        None, description="Why the deployment is in trouble (kube controller)."
    )
    container_health: ContainerHealth = Field(default_factory=ContainerHealth)
    placements: list[PlacementStatus] = addition(
        default_factory=list,
        description="Every cluster it is placed on, with its share (scheduler) and its ready "
        "replicas and state (derived from copies). Empty for a one-cluster application.",
    )
    copies: list[CopyStatus] = addition(
        default_factory=list,
        description="The copies on each cluster of a placement (kube controller).",
    )
    conditions: list[Condition] = addition(
        default_factory=list,
        description="Shoal addition (scheduler): ``Degraded`` while a placement runs on fewer "
        "clusters than it asked for, or without some of its replicas; the state stays RUNNING.",
    )
    services: dict[str, Any] = Field(default_factory=dict)
    mangled_observer_schema: list[dict[str, Any]] = Field(default_factory=list)
    last_applied_manifest: list[dict[str, Any]] = Field(default_factory=list)
    last_observed_manifest: list[dict[str, Any]] = Field(default_factory=list)
    pending_cleanups: list[dict[str, Any]] = addition(
        default_factory=list,
        description=(
            "Copies left on clusters that did not answer after a migration, removed when they"
            " answer again: {cluster: {namespace, name}, objects: [...]} (Shoal addition)."
        ),
    )
    kube_namespaces: dict[str, KubeNamespace] = addition(
        default_factory=dict,
        description=(
            "Per cluster (by name), the Kubernetes namespace its objects without"
            " metadata.namespace went to, kept so that nothing moves (kube controller;"
            " Shoal addition)."
        ),
    )
    complete_token: str | None = None
    complete_cert: str | None = None
    complete_key: str | None = None
    shutdown_token: str | None = None
    shutdown_cert: str | None = None
    shutdown_key: str | None = None
    shutdown_grace_period: datetime | None = Field(
        default=None, description="Deadline of the shutdown hook (set by Krake controllers)."
    )
    retries: int | None = None
    scheduled_retry: datetime | None = Field(
        default=None, description="Next retry after a failure (set by Krake controllers)."
    )


class _KubernetesKind(Kind):
    api: Literal["kubernetes"] = "kubernetes"


class Application(_KubernetesKind):
    kind: Literal["Application"] = "Application"
    spec: ApplicationSpec
    status: Annotated[ApplicationStatus, null_as(ApplicationStatus)] = Field(
        default_factory=ApplicationStatus
    )
    subresources = ("status", "binding", "complete", "shutdown", "retry")
    created_in_batches = True


def _no_kubeconfig(config: Any) -> Any:
    """Krake spells "no kubeconfig" (a cluster to be created on a cloud) as ``{}``."""
    return None if config == {} else config


ClusterMode = Literal["push", "pull"]
"""push: the hub dials the cluster with the kubeconfig it holds; pull: the cluster's agent
dials the hub (``shoal join``), and the hub holds no credential of it (docs/pull-mode.md)."""


class ClusterSpec(Model):
    kubeconfig: Annotated[
        dict[str, Any] | None,
        BeforeValidator(_no_kubeconfig),
        PlainSerializer(lambda config: config or {}, when_used="json"),
    ] = Field(
        default=None,
        description="Required on create and update unless spec.tosca is set (checked by "
        "shoal.model.validation); None in Python, {} on the wire (as Krake sends it).",
    )
    tosca: Annotated[dict[str, Any] | str, null_as(dict)] = Field(default_factory=dict)
    custom_resources: list[CustomResourceName] = Field(default_factory=list)
    metrics: list[MetricRef] = Field(default_factory=list)
    inherit_metrics: bool = addition(False)
    constraints: ClusterConstraintsOnCloud = Field(default_factory=ClusterConstraintsOnCloud)
    backoff: int = Field(default=1, ge=0)
    backoff_delay: int = Field(default=1, ge=0)
    backoff_limit: int = Field(default=-1, ge=-1)
    unschedulable: bool = addition(
        False,
        description="Cordoned: no new applications are placed here (shoal kube cluster cordon).",
    )
    mode: ClusterMode = addition(
        "push",
        description="push: the hub dials the cluster with spec.kubeconfig; pull: the "
        "cluster's agent dials the hub (shoal join) and the cluster has no kubeconfig.",
    )

    @property
    def to_build(self) -> bool:
        """Whether the cluster waits to be built on a cloud: a push cluster without a
        kubeconfig (a pull cluster has none, and is never built)."""
        return self.kubeconfig is None and self.mode == "push"

    @field_validator("metrics")
    @classmethod
    def _unique_metrics(cls, metrics: list[MetricRef]) -> list[MetricRef]:
        seen: set[tuple[str, bool]] = set()
        for metric in metrics:
            key = (metric.name, metric.namespaced)
            if key in seen:
                raise ValueError(f"metric {metric.name!r} is listed twice")
            seen.add(key)
        return metrics


class ClusterState(StrEnumByName):
    PENDING = "PENDING"
    CONNECTING = "CONNECTING"
    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"
    UNHEALTHY = "UNHEALTHY"
    NOTREADY = "NOTREADY"
    FAILING_METRICS = "FAILING_METRICS"
    CREATING = "CREATING"
    RECONCILING = "RECONCILING"
    DELETING = "DELETING"
    FAILING_RECONCILIATION = "FAILING_RECONCILIATION"
    FAILED = "FAILED"
    DEGRADED = "DEGRADED"


BUILDING_STATES = frozenset({
    ClusterState.CREATING, ClusterState.RECONCILING,
    ClusterState.FAILING_RECONCILIATION, ClusterState.DELETING, ClusterState.FAILED,
})  # fmt: skip
"""The states of a cluster the infrastructure controller builds on a cloud: it hands the
cluster over by writing CONNECTING, and the observer leaves these (and their reason) alone."""


class NodeCondition(Model):
    message: str = ""
    reason: str = ""
    status: str
    type: str


class NodeConditions(Model):
    conditions: list[NodeCondition] = Field(default_factory=list)


class NodeName(Model):
    name: str


class ClusterNode(Model):
    """One node of a member cluster in ``status.nodes`` (Krake's ``ClusterNode``)."""

    api: Literal["kubernetes"] = "kubernetes"
    kind: Literal["ClusterNode"] = "ClusterNode"
    metadata: NodeName
    status: NodeConditions | None = None


class ClusterStatus(Model):
    state: ClusterState = ClusterState.ONLINE
    reason: Reason | None = None
    metrics_reasons: dict[str, Reason] = Field(default_factory=dict)
    nodes: list[ClusterNode] = Field(
        default_factory=list, description="Nodes and their conditions, as Krake shows them."
    )
    node_summary: list[dict[str, Any]] = addition(
        default_factory=list,
        description=(
            "Shoal addition: a totals entry ({summary, count, ready, capacity, allocatable}),"
            " then {name, ready, capacity, allocatable, pressure} of at most 50 nodes."
        ),
    )
    custom_resources: list[str] = addition(
        default_factory=list, description="CRDs found on the cluster by the observer."
    )
    last_applied_tosca: Annotated[dict[str, Any] | str, null_as(dict)] = Field(default_factory=dict)
    cluster_id: str | None = None
    scheduled: datetime | None = None
    scheduled_to: ResourceRef | None = None
    running_on: ResourceRef | None = None
    kube_controller_triggered: datetime | None = None
    retries: Annotated[int, null_as(int)] = 0
    agent: str = addition(
        "",
        description="Shoal addition: URL of the cluster's agent (fleet pods), written by the "
        "agent itself when it starts.",
    )
    heartbeat: datetime | None = addition(
        None,
        description="Shoal addition, pull clusters: when the cluster's agent last renewed its "
        "lease; the observer marks the cluster OFFLINE once it is older than the lease.",
    )
    agent_version: str = addition(
        "", description="Shoal addition, pull clusters: the version of the cluster's agent."
    )


KUBE_FINALIZER = "shoal.kube/resources"
"""On an application the kube controller deploys: deleting it first removes its copies
from the member clusters (docs/kube.md). The kube controller writes it before its first
apply, or the API gives it to each new application (``shoal api --kube-finalizer``)."""

EVICTION_FINALIZER = "shoal.scheduler/eviction"
"""On a cluster with applications: deleting it moves them first (docs/scheduler.md)."""


class Cluster(_KubernetesKind):
    kind: Literal["Cluster"] = "Cluster"
    spec: ClusterSpec = Field(default_factory=ClusterSpec)
    status: Annotated[ClusterStatus, null_as(ClusterStatus)] = Field(
        default_factory=ClusterStatus
    )
    subresources = ("status", "binding")

    def initial_status(self) -> ClusterStatus:
        """CONNECTING until the observer has reached it; PENDING while it is still to be built.

        A cluster with a kubeconfig is not ONLINE just because it was registered: only the
        cluster observer, having listed its nodes, says so (as Krake's cluster controller).
        A cluster without one waits for the infrastructure to create it; a pull cluster is
        CONNECTING until its agent reports.
        """
        waits = self.spec.kubeconfig is None and self.spec.mode == "push"
        state = ClusterState.PENDING if waits else ClusterState.CONNECTING
        return ClusterStatus(state=state)
