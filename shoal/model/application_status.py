"""One writer per status field, and the one place where ``state`` and ``reason`` come from.

The scheduler, the kube controller and the observer each write their own fields
of an application's status (field-level patches, see docs/status-ownership.md);
none writes ``state`` or ``reason``. The API derives those two, the Krake fields
users see, from the writers' fields on every status write, so two writers can
never undo each other's word and the reason cannot flip between them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from shoal.model.base import Reason, ReasonCode, ResourceRef
from shoal.model.kubernetes import ApplicationState, ApplicationStatus, Cluster

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
            "placements",
            "conditions",
        }
    ),
    "kube-controller": frozenset(
        {
            "running_on",
            "deploy_state",
            "deploy_reason",
            "last_applied_manifest",
            "mangled_observer_schema",
            "last_observed_manifest",
            "container_health",
            "pending_cleanups",
            "copies",
            "kube_namespaces",
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
    "observer": frozenset({"services"}),
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
    """The error handler of Krake's scheduler: ≥100 deletes, waiting reasons wait, others fail."""
    if code.value >= 100:
        return ApplicationState.DELETING
    if code in (ReasonCode.RESOURCE_NOT_FOUND, ReasonCode.CLUSTER_DELETED):
        return ApplicationState.PENDING
    return ApplicationState.FAILED


def derive(status: ApplicationStatus) -> tuple[ApplicationState, Reason | None]:
    """The user-visible state and reason, from the writers' fields (first rule that holds).

    1. the kube controller ends the application (DELETING, COMPLETED…): its state;
    2. the scheduler cannot place it: PENDING (waiting), DEGRADED (waiting under Krake's
       back-off: ``NO_SUITABLE_RESOURCE`` with a next retry) or FAILED, with its reason;
    3. the kube controller's deploy state and reason;
    4. otherwise PENDING (placed, not yet deployed).
    """
    deploy = status.deploy_state
    if deploy is not None and deploy in _FINAL:
        return deploy, status.deploy_reason
    if status.schedule_reason is not None:
        code = status.schedule_reason.code
        if code is ReasonCode.NO_SUITABLE_RESOURCE and status.next_retry is not None:
            return ApplicationState.DEGRADED, status.schedule_reason
        return state_for(code), status.schedule_reason
    if deploy is not None:
        return deploy, status.deploy_reason
    if status.deploy_reason is not None:
        return ApplicationState.PENDING, status.deploy_reason
    return ApplicationState.PENDING, None


def fold_explicit(status: ApplicationStatus) -> None:
    """A whole-status write that sets ``state``/``reason`` itself (Krake's clients do).

    When they differ from what the fields derive, the writer meant them: a
    scheduling reason becomes the scheduler's when the fields then give the
    state written (PENDING or FAILED, as the scheduler would), anything else
    the deploy state and reason, so what a Krake client writes reads back.
    """
    explicit = (status.state, status.reason)
    if derive(status) == explicit:
        return
    reason = status.reason
    if reason is not None and reason.code in SCHEDULER_CODES:
        status.schedule_reason = reason
        if derive(status) == explicit:
            return
    status.schedule_reason = None
    status.deploy_state = status.state
    status.deploy_reason = reason


def apply(status: ApplicationStatus) -> None:
    """Set ``state`` and ``reason`` from the writers' fields, and how each placement runs."""
    status.state, status.reason = derive(status)
    if status.placements:
        join_copies(status)


def placed_on(status: ApplicationStatus) -> list[ResourceRef]:
    """The clusters an application is placed on: its cluster and each placement's, once."""
    return _once([status.scheduled_to, *(p.cluster for p in status.placements)])


def runs_on(status: ApplicationStatus) -> list[ResourceRef]:
    """The clusters its copies run on: the one it runs on and each copy's, once (pending
    clean-ups aside)."""
    return _once([status.running_on, *(c.cluster for c in status.copies)])


def _once(refs: list[ResourceRef | None]) -> list[ResourceRef]:
    """Each reference once, in order, by its fields: one pass, as an application placed on
    a hundred clusters is compared on every event of it."""
    seen: set[tuple[str, str | None, str, str]] = set()
    out = []
    for ref in refs:
        if ref is None:
            continue
        key = (ref.api, ref.namespace, ref.kind, ref.name)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return out


def join_copies(status: ApplicationStatus) -> None:
    """Each placement's ready replicas, state and reason: those of its cluster's copy."""
    copies = {(c.cluster.namespace, c.cluster.name): c for c in status.copies}
    for placement in status.placements:
        copy = copies.get((placement.cluster.namespace, placement.cluster.name))
        if copy is None or copy.replicas != placement.replicas:
            # not applied yet with this share: what runs there now is not its word
            ready = copy.ready_replicas if copy is not None else 0
            placement.ready_replicas, placement.state = ready, ApplicationState.PENDING
            placement.reason = copy.reason if copy is not None else None
        else:
            placement.ready_replicas, placement.state = copy.ready_replicas, copy.state
            placement.reason = copy.reason


def foreign_fields(writer: str, fields: Iterable[str]) -> list[str]:
    """Fields of a patch that belong to another writer (or are derived)."""
    own = OWNERS.get(writer, frozenset())
    return sorted(name for name in fields if name not in own)


#: What of a cluster a decision depends on, in the order of ``inputs_of``'s parts.
_INPUTS = ("labels", "state", "custom resources", "metrics", "cordon or deletion")


def _digest(value: Any) -> str:
    return hashlib.blake2b(repr(value).encode(), digest_size=3).hexdigest()


def inputs_of(cluster: Cluster) -> str:
    """A cluster's decision inputs, compact (``revision|labels|state|crds|metrics|flags``).

    Stored per cluster in an explanation, so that a later look can tell whether,
    and what, changed since — not just that the cluster was written (the observer
    and the finalizers write clusters without changing any input).
    """
    meta, spec = cluster.metadata, cluster.spec
    resources = sorted({*spec.custom_resources, *cluster.status.custom_resources})
    metrics = sorted((m.name, m.weight, m.namespaced) for m in spec.metrics)
    flags = f"{int(bool(getattr(spec, 'unschedulable', False)))}{int(meta.deleted is not None)}"
    return "|".join(
        (
            str(meta.resource_version or 0),
            _digest(sorted(meta.labels.items())),
            cluster.status.state.value,
            _digest(resources),
            _digest(metrics),
            flags,
        )
    )


def staleness(scheduling: Mapping[str, Any] | None, clusters: Iterable[Cluster]) -> list[str]:
    """What changed since a scheduling decision, among the clusters it looked at.

    Empty when the decision is current. ``clusters`` are those of the
    application's namespace now; the decision recorded their inputs.
    """
    recorded: Mapping[str, str] = (scheduling or {}).get("clusters") or {}
    if not recorded:
        return []
    now = {c.metadata.name: c for c in clusters}
    changes: list[str] = []
    for name, before in sorted(recorded.items()):
        cluster = now.get(name)
        if cluster is None:
            changes.append(f"cluster {name} was deleted")
            continue
        old, new = str(before).split("|"), inputs_of(cluster).split("|")
        what = [_INPUTS[i] for i in range(len(_INPUTS)) if old[i + 1 : i + 2] != new[i + 1 : i + 2]]
        if what:
            changes.append(
                f"cluster {name} changed: {', '.join(what)} (revision {old[0]} → {new[0]})"
            )
    if (scheduling or {}).get("clusters_total") == len(recorded):
        changes += [f"cluster {name} was added" for name in sorted(set(now) - set(recorded))]
    return changes
