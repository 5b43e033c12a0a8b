"""Cluster → cloud placement: a cluster bound to no cloud is given the best one.

Clusters without a kubeconfig are to be created: they are bound to the best
Cloud of their namespace or GlobalCloud, by cloud label and metric
constraints and the metric-only score (0 without metrics; clouds with metrics
preferred; random among ties). Magnum is deprecated in the seed and left out.

A cluster no cloud fits waits, retried after ``backoff.cap`` and at once when a
cloud changes: its ``status.reason`` says why (``RESOURCE_NOT_FOUND``, "no cloud
fits: 0/2 clouds available: 2 label location is DE") and a ``NoCloud`` warning
event says so once per cause. Binding clears the reason, with a ``BoundToCloud``
event naming the cloud.
"""

from __future__ import annotations

from typing import Any

from shoal.client.rest import Conflict
from shoal.events import Recorder
from shoal.model.base import Kind, Reason, ReasonCode, ResourceRef
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.scheduler.backends import Backend
from shoal.scheduler.framework import Request
from shoal.scheduler.handler import Handler


def cloud_backend(obj: Kind) -> Backend:
    cloud: Any = obj
    state = cloud.status.state
    return Backend(
        obj=cloud,
        name=cloud.metadata.name,
        namespace=cloud.metadata.namespace,
        labels=dict(cloud.metadata.labels),
        custom_resources=frozenset(),
        state=state,
        schedulable=state in ("ONLINE", "FAILING_METRICS") and cloud.metadata.deleted is None,
        metric_refs=list(cloud.spec.openstack.metrics),
    )


class CloudHandler(Handler):
    """Binds clusters to be created to the best cloud."""

    def __post_init__(self) -> None:
        self.events = Recorder(self.client, "scheduler", enabled=self.config.events)

    @staticmethod
    def wants_pass(cluster: Cluster) -> bool:
        return (
            cluster.spec.to_build
            and cluster.status.scheduled_to is None
            and cluster.metadata.deleted is None
            and cluster.status.state not in (ClusterState.FAILED, ClusterState.DELETING)
        )

    async def schedule(self, cluster: Cluster) -> float | None:
        """Bind the cluster to a cloud; the delay before trying again, or None when done."""
        if not self.wants_pass(cluster):
            return None
        constraints = cluster.spec.constraints.cloud
        # Stickiness plays no part: a cluster is bound to a cloud once.
        request = Request(
            namespace=cluster.metadata.namespace,
            labels=constraints.labels,
            metrics=constraints.metrics,
            sticky=False,
        )
        decision = self.framework.decide(request, self.backends.group(cluster.metadata.namespace))
        if decision.chosen is None:
            summary = decision.summary.replace("clusters", "clouds")
            await self._waiting(cluster, f"no cloud fits: {summary}")
            return self.config.backoff.cap
        chosen = decision.chosen
        cloud = ResourceRef(
            api="infrastructure",
            kind=chosen.obj.kind,
            namespace=chosen.namespace,
            name=chosen.name,
        )
        try:
            bound = await self.client.bind_cluster(
                cluster, cloud, resource_version=cluster.metadata.resource_version
            )
        except Conflict:
            return self.config.backoff.initial
        waited = bound.status.reason
        if waited is not None and waited.code is ReasonCode.RESOURCE_NOT_FOUND:
            await self.client.patch_status(
                Cluster, bound.metadata.name, bound.metadata.namespace, {"reason": None}
            )
        where = f"{chosen.obj.kind} {chosen.name}"
        self.events.emit(bound, "BoundToCloud", f"Bound to {where}, which is to create it")
        return None

    async def _waiting(self, cluster: Cluster, message: str) -> None:
        """The reason and the event of a cluster no cloud fits (written when they change)."""
        current = cluster.status.reason
        if current is not None and current.message == message:
            return
        reason = Reason(code=ReasonCode.RESOURCE_NOT_FOUND, message=message)
        await self.client.patch_status(
            Cluster, cluster.metadata.name, cluster.metadata.namespace,
            {"reason": reason.model_dump(mode="json")},
        )  # fmt: skip
        self.events.emit(cluster, "NoCloud", message, type="Warning", key=message)
