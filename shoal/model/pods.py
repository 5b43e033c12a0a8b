"""Group ``scheduling``: the fleet ``Pod``, one pod placed onto a node of some cluster.

The spec is a Kubernetes pod spec as it stands (paste ``spec`` from a
Kubernetes pod: fields Shoal does not read pass through to the member
cluster), plus ``placement`` hints: cluster label constraints in the constraint
language and a geo target. The fleet scheduler samples, decides and commits
through the cluster agents, and writes what happened to ``status``: the
phase, where the pod is, the attempts, a reason a person can read with the
per-phase explanation, and how long each phase took.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictFloat, StrictInt, ValidationInfo

from shoal.machinery.names import MAX_OBJECT_NAME
from shoal.machinery.quantity import EXAMPLES, is_request
from shoal.machinery.selectors import ConstraintError, LabelConstraint
from shoal.model.base import Kind, Model, trusted


def _quantity(value: str | int | float, info: ValidationInfo) -> str | int | float:
    if trusted(info):  # read back from the API, which checked it (informers decode each event)
        return value
    if not is_request(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity ({EXAMPLES})")
    return value


def _label_constraint(text: str, info: ValidationInfo) -> str:
    if trusted(info):  # parsing the grammar was a third of a pod's decoding in the scheduler
        return text
    try:
        LabelConstraint.parse(text)
    except ConstraintError as error:
        raise ValueError(str(error)) from None
    return text


Quantity = Annotated[str | int | float, AfterValidator(_quantity)]


class KubernetesPart(Model):
    """A part of a Kubernetes pod: unknown fields pass through to the member cluster."""

    model_config = ConfigDict(extra="allow")


class ResourceRequirements(KubernetesPart):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class Container(KubernetesPart):
    name: str = Field(min_length=1)
    image: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)


class Toleration(KubernetesPart):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""


class GeoTarget(Model):
    latitude: float = Field(ge=-90, le=90)
    longitude: float = Field(ge=-180, le=180)
    max_distance_km: float = Field(default=10.0, gt=0, description="Farthest node accepted")


class Placement(Model):
    """Shoal's hints beside the Kubernetes fields: which clusters, how near to a point."""

    cluster_labels: list[Annotated[str, AfterValidator(_label_constraint)]] = Field(
        default_factory=list,
        description="Cluster label constraints, e.g. 'location is DE'",
    )
    geo: GeoTarget | None = None


class KubernetesPodSpec(KubernetesPart):
    """A Kubernetes pod spec, with the fields placement reads (the cluster agents read it too)."""

    containers: list[Container] = Field(min_length=1)
    initContainers: list[Container] = Field(default_factory=list)
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    overhead: dict[str, Quantity] = Field(default_factory=dict)


class PodSpec(KubernetesPodSpec):
    """A Kubernetes pod spec (``containers`` required) with ``placement`` hints."""

    priority: int = Field(default=0, description="Higher is scheduled first")
    placement: Placement = Field(default_factory=Placement)

    def kubernetes(self) -> dict[str, Any]:
        """The spec as the member cluster gets it: without Shoal's hints and defaults."""
        return self.model_dump(mode="json", exclude_unset=True, exclude={"placement"})


class PodPhase(StrEnum):
    Pending = "Pending"
    Scheduled = "Scheduled"
    Failed = "Failed"


class PodTimings(Model):
    """Seconds spent per phase (the last attempt's sampling, decision and commit)."""

    # Strict: the fleet's status batch answers per item, so a coerced ``false`` would pass.
    queue: StrictFloat = 0.0
    sampling: StrictFloat = 0.0
    decision: StrictFloat = 0.0
    commit: StrictFloat = 0.0


class PodStatus(Model):
    phase: PodPhase = PodPhase.Pending
    cluster: str = ""
    node: str = ""
    attempts: StrictInt = 0
    reason: str = Field(default="", description="What happened, in words")
    explanation: dict[str, Any] = Field(
        default_factory=dict,
        description="Per phase: clusters asked and answering, nodes sampled, "
        "filtered out and why, candidates and commit outcomes",
    )
    timings: PodTimings = Field(default_factory=PodTimings)


class Pod(Kind):
    api: Literal["scheduling"] = "scheduling"
    kind: Literal["Pod"] = "Pod"
    spec: PodSpec
    status: PodStatus = Field(default_factory=PodStatus)

    subresources = ("status",)
    created_in_batches = True


class PodStatusItem(Model):
    """One pod's new status in a batch; ``uid`` guards against a pod re-created meanwhile."""

    namespace: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    name: str = Field(min_length=1, max_length=253)
    uid: str = Field(min_length=1)
    status: PodStatus


class PodStatusBatch(Model):
    """Body of ``POST /scheduling/podstatuses``: many pods' status writes, one round trip."""

    items: list[PodStatusItem] = Field(max_length=1000)
