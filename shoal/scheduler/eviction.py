"""Graceful cluster deletion, as Karmada's eviction: applications leave before the cluster.

Deleting a cluster that applications are scheduled to only marks it: the API
adds the finalizer ``shoal.scheduler/eviction``. The cluster takes no new
placements, each of its applications gets a scheduling pass at once (moved
elsewhere, or PENDING with CLUSTER_DELETED and ``scheduled_to`` cleared), and
when none is left on it, and no copy either while the cluster answers (the kube
controller removes them: a moved application's old copy once the new one runs,
an application that fits nowhere else withdrawn), the scheduler removes the
finalizer and the API removes the cluster. Nothing Shoal deployed is left behind
on a cluster it forgets. ``--force`` deletes without the finalizer; the applications get
the same passes afterwards.
Applications the scheduler does not pass (FAILED, being deleted) are unbound
here directly, so none names a deleted cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shoal.client.rest import NotFound, ShoalClient
from shoal.model.base import Reason, ReasonCode
from shoal.model.kubernetes import EVICTION_FINALIZER, AppKey, Application, Cluster, ClusterState

log = logging.getLogger(__name__)

ClusterKey = tuple[str | None, str]


class Eviction:
    """The finalizer's life on one cluster, and the applications a deleted cluster holds."""

    def __init__(
        self,
        client: ShoalClient,
        apps_on: Callable[[ClusterKey], set[AppKey]],
        app: Callable[[AppKey], Application | None],
        wants_pass: Callable[[Application], bool],
        copies_on: Callable[[ClusterKey], set[AppKey]] = lambda where: set(),
    ) -> None:
        self.client = client
        self.apps_on = apps_on
        self.copies_on = copies_on
        self.app = app
        self.wants_pass = wants_pass
        self.evicted = 0

    async def sync(self, where: ClusterKey, cluster: Cluster | None) -> bool:
        """Evict from a deleted cluster; release it when no application is left.

        ``cluster`` is None once it is gone (deleted with ``--force``, or with no
        application then). True when done; False while applications are still leaving.
        """
        keys = self.apps_on(where)
        if cluster is not None and cluster.metadata.deleted is None:
            return True
        await self.unbind_stuck(where[1], keys)
        if any(self.app(key) is not None for key in keys):
            return False
        reachable = cluster is not None and cluster.status.state is ClusterState.ONLINE
        if reachable and any(self.app(key) is not None for key in self.copies_on(where)):
            return False  # copies still running there: the kube controller removes them
        if cluster is not None and EVICTION_FINALIZER in cluster.metadata.finalizers:
            await self._release(cluster)
            log.info("cluster %s: no application left on it; removing it", where[1])
        return True

    async def unbind_stuck(self, cluster: str, keys: set[AppKey]) -> None:
        """Unbind the applications no scheduling pass will move (FAILED, being deleted)."""
        for key in list(keys):
            app = self.app(key)
            if app is None or self.wants_pass(app):
                continue
            target = app.status.scheduled_to
            placements = app.status.placements
            left = [p for p in placements if p.cluster.name != cluster]
            fields: dict[str, object] = {}
            if len(left) != len(placements):  # several clusters: this one's share goes
                fields["placements"] = [p.model_dump(mode="json") for p in left]
            if target is not None and target.name == cluster:
                fields.update(scheduled_to=left[0].cluster if left else None,
                              last_scheduled_to=target)  # fmt: skip
            if not fields:
                continue
            if app.metadata.deleted is None and app.status.schedule_reason is None:
                fields["schedule_reason"] = Reason(
                    code=ReasonCode.CLUSTER_DELETED, message=f"cluster {cluster} was deleted"
                )
            try:
                await self.client.patch_status(
                    Application, app.metadata.name, app.metadata.namespace, fields
                )
            except NotFound:
                continue
            self.evicted += 1

    async def _release(self, cluster: Cluster) -> None:
        update = cluster.model_copy(deep=True)
        update.metadata.finalizers = [
            f for f in update.metadata.finalizers if f != EVICTION_FINALIZER
        ]
        try:
            await self.client.update(update)
        except NotFound:
            pass
