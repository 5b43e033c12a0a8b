"""What each component says, and with which numbers: one function per kind of event.

Components call these from their hot paths with what they already hold (the
decision, the outcome, the failure); each builds a message that answers "why"
with figures (scores, clusters available, retry k of n, pods ready) and emits
it through the component's Recorder, which never waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shoal.events.recorder import Recorder
from shoal.model.base import Kind, Reason, ReasonCode, ResourceRef
from shoal.model.events import EventType
from shoal.model.kubernetes import (
    Application,
    ApplicationState,
    Cluster,
    ClusterState,
    ContainerHealth,
)


class _Decision(Protocol):
    """What the scheduler's Decision offers (kept structural: no scheduler import here)."""

    total: int
    available: int
    score: float | None
    ranking: list[dict[str, Any]]

    @property
    def summary(self) -> str: ...


def _score_of(decision: _Decision, cluster: str) -> dict[str, Any] | None:
    return next((e for e in decision.ranking if e.get("cluster") == cluster), None)


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# scheduler ------------------------------------------------------------------------------


def placed(
    events: Recorder,
    app: Application,
    decision: _Decision,
    chosen: str,
    *,
    current: ResourceRef | None,
    current_state: str | None,
    forced: bool,
) -> bool:
    """``Scheduled`` to a cluster, or ``Migrated`` from the current one; True on a migration.

    ``current_state`` is the current cluster's state as the scheduler sees it
    (None when it is gone).
    """
    fit = f"{decision.available}/{decision.total} clusters available"
    head = f"score {_score(decision.score)}, {fit}"
    if current is None or current.name == chosen:
        events.emit(app, "Scheduled", f"Scheduled to {chosen} ({head})", key=f"to {chosen}")
        return False
    entry = _score_of(decision, current.name)
    if entry is not None:
        sticky = entry.get("stickiness")
        term = f", stickiness {sticky['weight']:g}" if sticky else ""
        before = f"score {_score(entry.get('score'))}{term}"
        cause = "score"  # the numbers change from one occurrence to the next; the cause not
    elif current_state is None:
        before = cause = "cluster gone"
    elif current_state != "ONLINE":
        before = cause = f"cluster {current_state}"
    else:
        before = cause = "no longer fits"
    why = ", on request" if forced else ""
    message = f"Migrated from {current.name} ({before}) to {chosen} ({head}){why}"
    # Repeats are counted per cause: a move for a cluster gone OFFLINE and a later one for
    # a better score are two events, never one with the first cause lost.
    events.emit(app, "Migrated", message, key=f"{current.name} to {chosen} ({cause}{why})")
    return True


def _shares(placements: Sequence[tuple[str, int | None]]) -> str:
    return ", ".join(name if n is None else f"{name}: {n}" for name, n in placements)


def shares(
    events: Recorder,
    app: Application,
    after: Sequence[tuple[str, int | None]],
    before: Sequence[tuple[str, int | None]],
    lost: Sequence[str],
    *,
    forced: bool,
) -> None:
    """An application on several clusters was placed (``Scheduled``, listing each share),
    a lost cluster's share moved (``ShareMoved``), or a reschedule divided it again
    (``Rebalanced``)."""
    if not before:
        events.emit(app, "Scheduled", f"Scheduled to {_shares(after)}", key="placements")
    elif forced:
        message = f"Rebalanced on request: {_shares(before)} → {_shares(after)}"
        events.emit(app, "Rebalanced", message, key="rebalanced")
    elif lost:
        gained = [(n, r) for n, r in after if (n, r) not in before]
        message = f"Share of {', '.join(lost)} moved to {_shares(gained) or 'the others'}"
        events.emit(app, "ShareMoved", f"{message}; now {_shares(after)}", key=", ".join(lost))
    else:
        message = f"Scheduled to {_shares(after)} (was {_shares(before)})"
        events.emit(app, "Scheduled", message, key="placements")


def unschedulable(
    events: Recorder, app: Application, attempt: int, limit: int, delay: float, summary: str
) -> None:
    """No cluster fits yet: which retry this is (of ``limit``; -1: no limit), when, and why."""
    of = f"/{limit}" if limit >= 0 else ""
    message = f"No cluster fits, retry {attempt}{of} in {delay:g} s: {summary}"
    events.emit(app, "Unschedulable", message, type="Warning", key="retry")


def failed(events: Recorder, app: Application, attempts: int, summary: str) -> None:
    message = f"No cluster available after {attempts} attempts: {summary}"
    events.emit(app, "Failed", message, type="Warning")


def provider_health(events: Recorder, provider: Kind, before: Reason | None, now: Any) -> None:
    """A metrics provider started failing (``ProviderFailed``) or answers again."""
    reason: Reason | None = now.reason
    if reason is not None and (before is None or before.code != reason.code):
        message = f"{reason.code.name}: {reason.message} ({now.errors} failed fetches)"
        events.emit(provider, "ProviderFailed", message, type="Warning", key=reason.code.name)
    elif reason is None and before is not None:
        latency = now.fetch_latency_seconds
        took = f" in {latency * 1000:.0f} ms" if latency is not None else ""
        events.emit(provider, "ProviderRecovered", f"Metrics fetched again{took}")


# kube controller ------------------------------------------------------------------------


def deployed(events: Recorder, app: Application, cluster: str, health: ContainerHealth) -> None:
    """Emitted when an application becomes RUNNING where it is bound (not on every resync)."""
    status = app.status
    state = getattr(status, "deploy_state", None) or status.state
    if state is ApplicationState.RUNNING and (
        status.running_on is not None and status.running_on.name == cluster
    ):
        return
    if not events.changed(app, "deployed", cluster):
        return  # the same transition seen again from a stale copy
    pods = f"{health.running_pods}/{health.desired_pods} pods ready"
    objects = len(app.spec.manifest)
    message = f"Deployed on {cluster}: {pods}, {objects} objects applied"
    events.emit(app, "Deployed", message, key=cluster)


def deploy_failed(
    events: Recorder, app: Application, code: str, message: str, attempt: int, limit: int
) -> None:
    events.changed(app, "deployed", "")  # a later success is news again
    of = f"/{limit + 1}" if limit >= 0 else ""
    text = f"{code} (attempt {attempt}{of}): {message}"
    events.emit(app, "DeployFailed", text[:1000], type="Warning", key=code)


def took_over(events: Recorder, app: Application, what: str, former: str, cluster: str) -> None:
    """An object of another application (of the same namespace: the only one an object on
    the application's clusters can name) taken over, as ``conflict_resolution: overwrite``
    asked. ``former``: that application's name."""
    former = f"{app.metadata.namespace or 'default'}/{former}"
    message = (f"Took over {what} from application {former} on {cluster} "
               "(conflict_resolution: overwrite)")  # fmt: skip
    events.emit(app, "TookOver", message[:1000], type="Warning")


def deleted(events: Recorder, app: Application, clusters: int) -> None:
    events.emit(app, "Deleted", f"Removed from {clusters} cluster(s)")


# cluster observer -----------------------------------------------------------------------

LIFECYCLE = frozenset({
    ClusterState.ONLINE, ClusterState.PENDING, ClusterState.CREATING, ClusterState.CONNECTING,
    ClusterState.RECONCILING, ClusterState.DELETING,
})  # fmt: skip
"""A cluster's normal steps: entering one is a Normal event, entering any other a Warning."""


#: Why a cluster is OFFLINE, by its reason's code, in its users' words.
OFFLINE_BECAUSE = {
    ReasonCode.CLUSTER_NOT_REACHABLE: "its API cannot be reached",
    ReasonCode.KUBERNETES_ERROR: "its API answers with an error",
}


def cluster_state(events: Recorder, cluster: Cluster, old: Cluster | None) -> None:
    """A cluster's state changed (whoever wrote it): ``Online``, ``Offline``, ``NotReady``…

    The nodes ready are told only when they were seen: an OFFLINE cluster's node summary
    is the last one observed before it stopped answering, so its event says why instead.
    """
    if old is None or old.status.state == cluster.status.state:
        return
    state = cluster.status.state.value
    reason = "".join(part.capitalize() for part in state.split("_"))
    message = f"{old.status.state.value} → {state}"
    why = cluster.status.reason
    summary = next((n for n in cluster.status.node_summary if n.get("summary")), None)
    if cluster.status.state is ClusterState.OFFLINE:
        because = OFFLINE_BECAUSE.get(why.code) if why is not None else None
        if because is not None:
            message += f", {because}"
    elif summary is not None:
        message += f", {summary.get('ready')}/{summary.get('count')} nodes ready"
    if why is not None and why.message:
        message += f": {why.message}"
    elif cluster.status.metrics_reasons:
        message += f": failing metrics {', '.join(sorted(cluster.status.metrics_reasons))}"
    kind: EventType = "Normal" if cluster.status.state in LIFECYCLE else "Warning"
    events.emit(cluster, reason, message[:1000], type=kind, key=state)


def cluster_joined(events: Recorder, cluster: Cluster) -> None:
    """A pull cluster registered itself with a join token (``shoal join``)."""
    events.emit(cluster, "Joined", "joined in pull mode: its agent dials the hub, which "
                "holds no credential of it")  # fmt: skip


# infrastructure controller --------------------------------------------------------------


def infrastructure_step(events: Recorder, cluster: Cluster, step: str, message: str) -> None:
    """A normal step of a cluster built on a cloud: ``Creating``, ``Created``,
    ``Reconciling``, ``Reconciled``, ``Deleting``."""
    events.emit(cluster, step, message)


def infrastructure_failed(events: Recorder, cluster: Cluster, cause: str, message: str) -> None:
    """A provider's call failed. One event per cause (the reason code), counted over the
    retries, its message the latest attempt's (which attempt, when the next is)."""
    events.emit(cluster, "InfrastructureFailed", message[:1000], type="Warning", key=cause)


def infrastructure_gone(events: Recorder, cluster: Cluster, provider: str, ident: str) -> None:
    """The provider no longer knows the cluster's infrastructure: it is built again."""
    message = f"{provider} no longer knows {ident}; building it again"
    events.emit(cluster, "InfrastructureGone", message, type="Warning", key=ident)


# reschedule task controller -------------------------------------------------------------


def reschedule_requested(events: Recorder, task: Kind, count: int, total: int) -> None:
    """The task, how many of its targets it asked for in one pass. Each application's own
    event is written by the API with its stamp (``POST /scheduling/reschedules`` with
    ``task``), in the same commit."""
    if count:
        events.emit(task, "RescheduleRequested", f"Requested for {count} of {total} targets")
