"""What an application asks of a cluster, and how a cluster looks to the scheduler.

The scheduler's passes, the API's dry run and the wake-ups on cluster events all ask
the same question of a cluster; this module states it once: a cluster as a ``Backend``,
an application as a ``Request``, and whether one fits the other.
"""

from __future__ import annotations

from typing import Any

from shoal.machinery.selectors import LabelConstraint, MetricConstraint
from shoal.model.application_status import inputs_of
from shoal.model.base import ResourceRef
from shoal.model.kubernetes import Application, Cluster, ClusterState
from shoal.model.placement import desired_replicas, pod_request
from shoal.model.scheduler_config import SchedulerConfig
from shoal.scheduler.backends import Backend, Group
from shoal.scheduler.framework import Decision, Request
from shoal.scheduler.plugins.fit import holds

SCHEDULABLE_CLUSTER_STATES = (ClusterState.ONLINE.value, ClusterState.FAILING_METRICS.value)


def cluster_backend(obj: Any) -> Backend:
    cluster: Cluster = obj
    state = cluster.status.state.value
    return Backend(
        obj=cluster,
        name=cluster.metadata.name,
        namespace=cluster.metadata.namespace,
        labels=dict(cluster.metadata.labels),
        custom_resources=frozenset(cluster.spec.custom_resources)
        | frozenset(cluster.status.custom_resources),
        state=state,
        schedulable=state in SCHEDULABLE_CLUSTER_STATES and cluster.metadata.deleted is None,
        metric_refs=list(cluster.spec.metrics),
        failing_excludes=True,
    )


def request_for(app: Application, config: SchedulerConfig, *, sticky: bool = True) -> Request:
    constraints = app.spec.constraints.cluster
    current = app.status.scheduled_to
    pod, pods, own = pods_to_hold(app)
    return Request(
        namespace=app.metadata.namespace,
        labels=constraints.labels,
        metrics=constraints.metrics,
        custom_resources=constraints.custom_resources,
        current=(current.namespace, current.name) if current else None,
        sticky=sticky,
        stickiness=config.stickiness,
        pod=tuple(sorted(pod.items())),
        pods=pods,
        own=own,
    )


def pods_to_hold(app: Application) -> tuple[dict[str, int], int, dict[str, int]]:
    """What one pod of the application requests, how many a cluster must hold, and its
    pods each cluster runs already.

    One cluster, or a duplicated placement: every replica; a divided one: at least one
    (``shoal.scheduler.spread`` gives each cluster no more than its room). Its pods on a
    cluster count as room for it unless its pods now ask for more than they did.
    """
    manifest = app.spec.manifest
    pod = pod_request(manifest)
    total = desired_replicas(manifest)
    placement = app.spec.placement
    divided = placement is not None and placement.replicas == "divided" and total is not None
    pods = 1 if divided and total else (total or 0)
    status = app.status
    applied = status.last_applied_manifest
    ran = desired_replicas(applied) if applied else total
    if applied and not all(v <= pod_request(applied).get(k, 0) for k, v in pod.items()):
        return pod, pods, {}  # bigger pods: the ones running there make no room for them
    own: dict[str, int] = {}
    for share in status.placements:
        count = share.replicas if share.replicas is not None else ran
        own[share.cluster.name] = count or 0
    if not status.placements and status.scheduled_to is not None:
        own[status.scheduled_to.name] = ran or 0
    return pod, pods, own


def backend_fits(request: Request, backend: Backend) -> bool:
    """Whether one backend passes every filter: used to wake waiting applications."""
    if not backend.schedulable:
        return False
    if not all(LabelConstraint.parse(c).matches(backend.labels) for c in request.labels):
        return False
    if not all(crd in backend.custom_resources for crd in request.custom_resources):
        return False
    if request.pod and request.pods > 0 and not holds(backend, request, request.pods):
        return False
    for text in request.metrics:
        constraint = MetricConstraint.parse(text)
        if not constraint.matches(backend.metric_value(constraint.metric)):
            return False
    return True


def meets_own_constraints(request: Request, backend: Backend) -> bool:
    """The labels and custom resources the application asks for, on ``backend``: what the
    application requires of a cluster, as opposed to the cluster's state (cordoned,
    OFFLINE, failing metrics) or changing metric values, which leave it where it runs."""
    if not all(LabelConstraint.parse(c).matches(backend.labels) for c in request.labels):
        return False
    return all(crd in backend.custom_resources for crd in request.custom_resources)


#: Up to this many clusters in a namespace, an explanation records every one's revision.
EXPLAIN_ALL_REVISIONS = 100


def looked_at(group: Group, decision: Decision) -> dict[str, str]:
    """Inputs of the clusters a decision looked at, to tell later whether it is stale.

    Every cluster of a small namespace; in a large one, those the explanation names.
    """
    backends = group.backends
    if len(backends) > EXPLAIN_ALL_REVISIONS:
        named = {str(r["cluster"]) for r in decision.ranking}
        named.update(n for r in decision.rejections for n in r.names)
        if decision.chosen is not None:
            named.add(decision.chosen.name)
        backends = [b for b in backends if b.name in named]
    return {b.name: inputs_of(b.obj) for b in backends if isinstance(b.obj, Cluster)}


def ref_of(backend: Backend) -> ResourceRef:
    return ResourceRef(
        api="kubernetes", kind="Cluster", namespace=backend.namespace, name=backend.name
    )


def ref_json(ref: ResourceRef) -> dict[str, Any]:
    """A reference as a binding item carries it (built directly: no model dump)."""
    return {"api": ref.api, "kind": ref.kind, "namespace": ref.namespace, "name": ref.name}


def ref_key(ref: ResourceRef) -> tuple[str | None, str]:
    return (ref.namespace, ref.name)


def alive(backend: Backend | None) -> bool:
    """The cluster exists and is not being deleted."""
    return backend is not None and backend.obj.metadata.deleted is None
