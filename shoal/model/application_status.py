"""One writer per status field, and the one place where ``state`` and ``reason`` come from.

The scheduler, the kube controller and the observer each write their own fields
of an application's status (field-level patches, see docs/status-ownership.md);
none writes ``state`` or ``reason``. The API derives those two, the Krake fields
users see, from the writers' fields on every status write, so two writers can
never undo each other's word and the reason cannot flip between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shoal.model.base import Reason, ReasonCode
from shoal.model.kubernetes import ApplicationState, ApplicationStatus

#: Reasons that only the scheduler gives (the application is not placed).
SCHEDULER_CODES = frozenset(
    {ReasonCode.RESOURCE_NOT_FOUND, ReasonCode.NO_SUITABLE_RESOURCE, ReasonCode.CLUSTER_DELETED}
)

#: Deploy states that end an application's life: they win over any scheduling word.
_FINAL = frozenset(
    {
        ApplicationState.DELETING,
        ApplicationState.DELETED,
        ApplicationState.COMPLETED,
        ApplicationState.READY_FOR_ACTION,
        ApplicationState.WAITING_FOR_CLEANING,
    }
)

#: Which component writes which status field. ``api`` fields are set by user
#: actions through the API (reschedule, retry); ``derived`` ones by the API only.
OWNERS: dict[str, frozenset[str]] = {
    "scheduler": frozenset(
        {
            "scheduled",
            "scheduled_to",
            "last_scheduled",
            "last_scheduled_to",
            "kube_controller_triggered",
            "scheduling",
            "schedule_reason",
            "scheduler_retries",
            "scheduler_attempts",
            "next_retry",
        }
    ),
    "kube-controller": frozenset(
        {
            "running_on",
            "deploy_state",
            "deploy_reason",
            "last_applied_manifest",
            "mangled_observer_schema",
            "container_health",
            "pending_cleanups",
            "retries",
            "scheduled_retry",
            "complete_token",
            "complete_cert",
            "complete_key",
            "shutdown_token",
            "shutdown_cert",
            "shutdown_key",
            "shutdown_grace_period",
        }
    ),
    "observer": frozenset({"last_observed_manifest", "services"}),
    "api": frozenset({"reschedule_requested"}),
    "derived": frozenset({"state", "reason"}),
}

#: Authenticated component users, by the writer they are.
WRITERS = {
    "system:scheduler": "scheduler",
    "system:kube-controller": "kube-controller",
    "system:cluster-observer": "observer",
}


def state_for(code: ReasonCode) -> ApplicationState:
    """The error handler of seed 000: ≥100 deletes, waiting reasons wait, others fail."""
    if code.value >= 100:
        return ApplicationState.DELETING
    if code in (ReasonCode.RESOURCE_NOT_FOUND, ReasonCode.CLUSTER_DELETED):
        return ApplicationState.PENDING
    return ApplicationState.FAILED


def derive(status: ApplicationStatus) -> tuple[ApplicationState, Reason | None]:
    """The user-visible state and reason, from the writers' fields (first rule that holds).

    1. the kube controller ends the application (DELETING, COMPLETED…): its state;
    2. the scheduler cannot place it: PENDING (waiting) or FAILED, with its reason;
    3. the kube controller's deploy state and reason;
    4. otherwise PENDING (placed, not yet deployed).
    """
    deploy = status.deploy_state
    if deploy is not None and deploy in _FINAL:
        return deploy, status.deploy_reason
    if status.schedule_reason is not None:
        return state_for(status.schedule_reason.code), status.schedule_reason
    if deploy is not None:
        return deploy, status.deploy_reason
    if status.deploy_reason is not None:
        return ApplicationState.PENDING, status.deploy_reason
    return ApplicationState.PENDING, None


def fold_explicit(status: ApplicationStatus) -> None:
    """A whole-status write that sets ``state``/``reason`` itself (Krake's clients do).

    When they differ from what the fields derive, the writer meant them: a
    scheduling reason becomes the scheduler's, anything else the deploy state.
    """
    if derive(status) == (status.state, status.reason):
        return
    reason = status.reason
    if reason is not None and reason.code in SCHEDULER_CODES:
        status.schedule_reason = reason
        return
    status.schedule_reason = None
    status.deploy_state = status.state
    status.deploy_reason = reason


def apply(status: ApplicationStatus) -> None:
    """Set ``state`` and ``reason`` from the writers' fields."""
    status.state, status.reason = derive(status)


def foreign_fields(writer: str, fields: Mapping[str, Any]) -> list[str]:
    """Fields of a patch that belong to another writer (or are derived)."""
    own = OWNERS.get(writer, frozenset())
    return sorted(name for name in fields if name not in own)
