"""What the RescheduleTask controller reads of an application: its cache's model.

The controller decodes every application event twice per target (the stamp,
then the binding), and as often again in a bare failover it only watches.
Decoding the whole Application (manifest, observer schema, hooks, cluster
constraints, container health...) was most of its CPU at 10,000 targets; this
view reads the fields a target is selected and judged by and skips the rest
of each event unread. It is never written back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shoal.model.base import Kind, Reason, ResourceRef
from shoal.model.kubernetes import ApplicationState


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
