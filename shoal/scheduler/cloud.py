"""Cluster → cloud placement (seed 004, "Cluster handler").

Clusters without a kubeconfig are to be created: they are bound to the best
Cloud of their namespace or GlobalCloud, by cloud label and metric
constraints and the metric-only score (0 without metrics; clouds with metrics
preferred; random among ties). Magnum is deprecated in the seed and left out.
"""

from __future__ import annotations

from typing import Any

from shoal.client.rest import Conflict
from shoal.model.base import Kind, ResourceRef
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.scheduler.application import Handler
from shoal.scheduler.fleet import Backend
from shoal.scheduler.framework import Request


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

    @staticmethod
    def wants_pass(cluster: Cluster) -> bool:
        return (
            cluster.spec.kubeconfig is None
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
        decision = self.framework.decide(request, self.fleet.group(cluster.metadata.namespace))
        if decision.chosen is None:
            return self.config.backoff.cap
        chosen = decision.chosen
        cloud = ResourceRef(
            api="infrastructure",
            kind=chosen.obj.kind,
            namespace=chosen.namespace,
            name=chosen.name,
        )
        try:
            await self.client.bind_cluster(
                cluster, cloud, resource_version=cluster.metadata.resource_version
            )
        except Conflict:
            return self.config.backoff.initial
        return None
