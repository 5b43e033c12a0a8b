"""Group ``scheduling``: the RescheduleTask, which reschedules applications on demand, and
the SchedulerConfiguration, which a running scheduler publishes.

A task selects applications (by reference, by label selector per namespace,
or by the cluster they are on), and the task controller stamps its trigger
time (``metadata.created``) on each of them. The scheduler reschedules an
application whose ``status.reschedule_requested`` is later than its
``status.last_scheduled``, ignoring stickiness; nothing is reset afterwards,
so a repeated stamp or a restarted controller does no harm.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from shoal.machinery.names import MAX_OBJECT_NAME
from shoal.machinery.selectors import ConstraintError, LabelSelector
from shoal.model.base import Kind, Model, Moment, check_name
from shoal.model.scheduler_config import SchedulerConfig

DEFAULT_NAMESPACE = "default"


def _selector(text: str) -> str:
    try:
        LabelSelector.parse(text)
    except ConstraintError as error:
        raise ValueError(str(error)) from None
    return text


def _cluster_name(text: str) -> str:
    namespace, _, name = text.rpartition("/")
    check_name(name)
    if namespace:
        check_name(namespace)
    return text


class ResourceSelector(Model):
    """One application, named explicitly."""

    api: str = "kubernetes"
    kind: str = "Application"
    namespace: str = DEFAULT_NAMESPACE
    name: Annotated[str, AfterValidator(check_name)]


class PolicySelector(Model):
    """Every application of a namespace whose labels match (empty selector: all of them)."""

    namespace: Annotated[str, AfterValidator(check_name)] = DEFAULT_NAMESPACE
    label_selector: Annotated[str, AfterValidator(_selector)] = Field(
        default="", examples=["tier=web,env!=dev"]
    )


ClusterName = Annotated[
    str,
    AfterValidator(_cluster_name),
    Field(description="Cluster name, optionally 'namespace/name' (default namespace 'default')"),
]


class Requester(Model):
    """Who asked: with security on, the API writes it at creation and keeps it after."""

    user: str
    groups: list[str] = Field(default_factory=list)


class RescheduleTaskSpec(Model):
    target_ref_resource: list[ResourceSelector] = Field(default_factory=list)
    target_ref_policy: list[PolicySelector] = Field(default_factory=list)
    target_clusters: list[ClusterName] = Field(
        default_factory=list, description="Every application now on one of these clusters."
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        description="Delete the task this many seconds after it finished; unset: keep it.",
    )
    requested_by: Requester | None = Field(
        default=None,
        description="Set by the API: the task acts only on applications this user may update.",
    )

    @model_validator(mode="after")
    def _some_target(self) -> RescheduleTaskSpec:
        if not (self.target_ref_resource or self.target_ref_policy or self.target_clusters):
            raise ValueError(
                "select targets with target_ref_resource, target_ref_policy or target_clusters"
            )
        return self


class TargetResult(StrEnum):
    Successful = "Successful"
    Failed = "Failed"


class TargetReason(StrEnum):
    """Machine-readable reason of a target's result."""

    Rescheduled = "Rescheduled"
    ApplicationNotFound = "ApplicationNotFound"
    ApplicationDeleting = "ApplicationDeleting"
    ApplicationFailed = "ApplicationFailed"
    NoSuitableCluster = "NoSuitableCluster"
    MigrationDisabled = "MigrationDisabled"
    UnsupportedKind = "UnsupportedKind"
    Forbidden = "Forbidden"


class TargetStatus(Model):
    """One observed target: pending while ``result`` is None."""

    api: str = "kubernetes"
    kind: str = "Application"
    namespace: str
    name: str
    result: TargetResult | None = None
    reason: TargetReason | None = None
    message: str = ""
    cluster: str | None = Field(default=None, description="Where the application is now.")


class TaskPhase(StrEnum):
    Pending = "Pending"  # not observed by the controller yet
    Running = "Running"
    Finished = "Finished"


class RescheduleTaskStatus(Model):
    phase: TaskPhase = TaskPhase.Pending
    trigger_time: datetime | None = Field(
        default=None, description="Stamped on every target (the task's creation time)."
    )
    targets: list[TargetStatus] = Field(default_factory=list)
    total: int = 0
    successful: int = 0
    failed: int = 0
    pending: int = 0
    finish_time: datetime | None = None


class RescheduleTask(Kind):
    api: Literal["scheduling"] = "scheduling"
    kind: Literal["RescheduleTask"] = "RescheduleTask"
    spec: RescheduleTaskSpec
    status: RescheduleTaskStatus = Field(default_factory=RescheduleTaskStatus)

    subresources = ("status",)


PUBLISHED_AS = "scheduler"
"""The one name every scheduler publishes its configuration under, whatever its lease's
name, and the one the API's dry run decides with."""

LEASE_LABEL = "scheduler.shoal/lease"
"""Label of the published configuration: the lease of the scheduler that published it."""


class SchedulerConfiguration(Kind):
    """The configuration a scheduler decides with, published by the scheduler when it
    starts (and at each term it leads) as ``scheduler``, labelled with the name of its
    lease (``LEASE_LABEL``): the last scheduler to start leading is the one that runs.

    The API's dry run decides with it, so that a dry run and the scheduler never
    disagree; while none is published, the dry run uses the defaults and says so.
    """

    api: Literal["scheduling"] = "scheduling"
    kind: Literal["SchedulerConfiguration"] = "SchedulerConfiguration"
    spec: SchedulerConfig = Field(default_factory=SchedulerConfig)


class RescheduleRequest(Model):
    """Body of ``PUT .../applications/{name}/reschedule``: ask for a forced pass."""

    requested: Moment = Field(description="Trigger time (RFC 3339); only moves forward.")


class RescheduleItem(RescheduleRequest):
    namespace: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    name: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)


class RescheduleBatch(Model):
    """Body of ``POST /scheduling/reschedules``: many requests, one round trip."""

    items: list[RescheduleItem] = Field(max_length=1000)
    task: Annotated[str, AfterValidator(check_name)] | None = Field(
        default=None,
        description="The RescheduleTask asking: each application stamped gets its "
        "RescheduleRequested event in the same commit.",
    )
