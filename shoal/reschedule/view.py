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

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from shoal.model.base import Kind, Metadata
from shoal.model.kubernetes import ApplicationStatus
from shoal.model.scheduling import RescheduleTask, RescheduleTaskStatus


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Constraints(_View):
    migration: bool = True


class _Spec(_View):
    constraints: _Constraints = Field(default_factory=_Constraints)


# What a forced pass's explanation tells a task (``judge``); the rest (the ranking, every
# cluster's metric terms) would only be kept alive in the cache for the collector to walk.
_ANSWER = ("forced", "chosen", "reschedule_requested", "summary")


def _answer(value: Any) -> Any:
    return {k: value[k] for k in _ANSWER if k in value} if isinstance(value, dict) else value


_JUDGED = (
    "state", "reason", "scheduled_to", "last_scheduled", "reschedule_requested", "placements"
)

if TYPE_CHECKING:
    _Status = ApplicationStatus  # the view's fields are the application's, typed alike
else:
    _Status = create_model(
        "_Status",
        __base__=_View,
        scheduling=(Annotated[dict[str, Any] | None, BeforeValidator(_answer)], None),
        **{
            name: (info.annotation, info)
            for name, info in ApplicationStatus.model_fields.items()
            if name in _JUDGED
        },
    )


class _Meta(Metadata):
    # Read past, not validated, and not kept: what the application is bound to is in status.
    owners: Annotated[Any, BeforeValidator(lambda _: [])] = Field(default_factory=list)


class ApplicationView(Kind):
    """An Application as the task controller judges it (selection and results)."""

    model_config = ConfigDict(extra="ignore")

    api: Literal["kubernetes"] = "kubernetes"
    kind: Literal["Application"] = "Application"
    metadata: _Meta
    spec: _Spec = Field(default_factory=_Spec)
    status: _Status = Field(default_factory=_Status)


class _TaskStatus(RescheduleTaskStatus):
    # Read past, not validated, and not kept.
    targets: Annotated[Any, BeforeValidator(lambda _: None)] = None


class TaskView(RescheduleTask):
    """A RescheduleTask without its targets: the controller keeps those in memory while it
    runs (read once, at the start), and each of its progress writes comes back as an event."""

    status: _TaskStatus = Field(default_factory=_TaskStatus)
