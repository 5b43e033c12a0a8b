"""A pull cluster's agent keeps its Cluster's status, as the observer does for push clusters.

It reads the member cluster with the member's own credentials (nodes, CRDs, pods),
derives the observer's fields with the observer's computation
(``shoal.model.observed``) and writes them, with its lease (``status.heartbeat``)
and its version, through the cluster's own credential: every ``every`` seconds,
which renews the lease. When the member's API does not answer, the status says
so (OFFLINE, as the observer would write it) and the lease is still renewed: the
agent is there, its cluster is not. The hub's observer marks the cluster OFFLINE
when the writes stop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from shoal.agent.joining import revoked
from shoal.client.kube import KubeApiError, KubeCluster, KubeUnreachable
from shoal.client.rest import ApiError, Conflict, ShoalClient, Unreachable
from shoal.machinery.backoff import Backoff
from shoal.machinery.paging import every_item
from shoal.machinery.types import Obj
from shoal.model.base import utcnow
from shoal.model.kubernetes import Cluster, ClusterStatus
from shoal.model.observed import observed_status, pod_usage, unreachable

log = logging.getLogger(__name__)

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FIELDS = ("state", "reason", "nodes", "node_summary", "custom_resources", "heartbeat",
          "agent_version")  # fmt: skip
"""What the agent writes of its cluster's status (the API lets it write nothing else)."""
RENEW_EVERY = 10.0
"""Seconds between two status writes, each renewing the lease (the observer's lease is 40 s
by default: three renewals may fail before the cluster counts as gone)."""


async def _items(kube: KubeCluster, path: str) -> list[Obj]:
    """Every item of a list, 500 a page."""
    return await every_item(lambda query: kube.request("GET", path, query=query), limit=500)


async def observe(kube: KubeCluster, status: ClusterStatus) -> ClusterStatus:
    """``status`` with what the member cluster shows now (OFFLINE when it does not answer)."""
    try:
        nodes = await _items(kube, NODES)
        try:
            crds = [crd["metadata"]["name"] for crd in await _items(kube, CRDS)]
        except KubeApiError as error:
            if error.status != 404:
                raise
            crds = []  # a cluster without CRDs' API
        pods = [usage for pod in await _items(kube, PODS) if (usage := pod_usage(pod))]
    except (KubeUnreachable, KubeApiError) as error:
        return unreachable(status, str(error), isinstance(error, KubeApiError))
    return observed_status(status, nodes, crds, pods)


@dataclass
class StatusKeeper:
    """Writes the cluster's status and lease through ``client`` (the cluster's own
    credential) until cancelled."""

    client: ShoalClient
    kube: KubeCluster
    namespace: str
    name: str
    version: str
    every: float = RENEW_EVERY
    writes: int = 0
    renewed: asyncio.Event = field(default_factory=asyncio.Event)

    async def once(self) -> Cluster:
        """One status write (a compare-and-swap, derived again on a conflict)."""
        for _ in range(5):
            cluster = await self.client.get(Cluster, self.name, self.namespace)
            status = await observe(self.kube, cluster.status)
            status.heartbeat = utcnow()
            status.agent_version = self.version
            fields = {name: getattr(status, name) for name in FIELDS}
            try:
                written = await self.client.patch_status(
                    Cluster, self.name, self.namespace, fields, cluster.metadata.resource_version
                )
            except Conflict:
                continue
            self.writes += 1
            self.renewed.set()
            if written.status.state.value == "CONNECTING":
                continue  # back from OFFLINE: one write in CONNECTING, then the real state
            return written
        raise RuntimeError(f"cluster {self.namespace}/{self.name}: status kept changing")

    async def run(self) -> None:
        backoff = Backoff(0.5, self.every)
        while True:
            try:
                await self.once()
                backoff.succeeded()
                await asyncio.sleep(self.every)
            except asyncio.CancelledError:
                raise
            except (ApiError, Unreachable, RuntimeError) as error:  # the hub is away
                if revoked(error):
                    raise
                log.warning("cluster %s/%s: status not written: %s", self.namespace,
                            self.name, error)  # fmt: skip
                await asyncio.sleep(backoff.failed())
