"""What the RescheduleTask controller reads of applications and tasks: its caches' models.

The controller decodes every application event twice per target (the stamp,
then the binding), and as often again in a bare failover it only watches.
Decoding the whole Application (manifest, observer schema, hooks, cluster
constraints, container health...) was most of its CPU at 10,000 targets; this
view reads the fields a target is selected and judged by and skips the rest
of each event unread. A task's view leaves out its targets (10,000 of them
decoded again on every progress write). Neither is ever written back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from shoal.model.base import Kind, Reason, ResourceRef
from shoal.model.kubernetes import ApplicationState
from shoal.model.scheduling import RescheduleTask, RescheduleTaskStatus


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Constraints(_View):
    migration: bool = True


class _Spec(_View):
    constraints: _Constraints = Field(default_factory=_Constraints)


class _Status(_View):
    state: ApplicationState = ApplicationState.PENDING
    reason: Reason | None = None
    scheduled_to: ResourceRef | None = None
    last_scheduled: datetime | None = None
    reschedule_requested: datetime | None = None
    scheduling: dict[str, Any] | None = None


class ApplicationView(Kind):
    """An Application as the task controller judges it (selection and results)."""

    model_config = ConfigDict(extra="ignore")

    api: Literal["kubernetes"] = "kubernetes"
    kind: Literal["Application"] = "Application"
    spec: _Spec = Field(default_factory=_Spec)
    status: _Status = Field(default_factory=_Status)

    plural = "applications"
    namespaced = True


class _TaskStatus(RescheduleTaskStatus):
    # Read past, not validated, and not kept.
    targets: Annotated[Any, BeforeValidator(lambda _: None)] = None


class TaskView(RescheduleTask):
    """A RescheduleTask without its targets: the controller keeps those in memory while it
    runs (read once, at the start), and each of its progress writes comes back as an event."""

    status: _TaskStatus = Field(default_factory=_TaskStatus)
