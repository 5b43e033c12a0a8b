"""Fleet pods end to end: agents on sim clusters, registered through the API; pod builders.

``shoal up``, the tests and ``bench/fleet.py`` start agents the same way: each
sim cluster registered as a Cluster, one agent per cluster serving on the
running loop, its URL written into the cluster's status by the agent's own
registration code.
"""

from __future__ import annotations

from typing import Any

from shoal.agent.local import LocalAgents
from shoal.agent.server import AgentServer
from shoal.client.rest import NotFound, ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Cluster, ClusterSpec
from shoal.model.pods import Container, GeoTarget, Placement, Pod, PodSpec, ResourceRequirements
from shoal.sim.server import SimServer

NS = "default"


class FleetAgents(LocalAgents):
    """Agents of a sim fleet's clusters."""

    async def start_on(self, sim: SimServer, name: str, port: int = 0,
                       **config: Any) -> AgentServer:
        return await self.start(name, sim.clusters.kubeconfig(name), port, **config)


async def register_clusters(client: ShoalClient, sim: SimServer,
                            labels: dict[str, dict[str, str]] | None = None) -> None:
    """Every sim cluster as a Cluster in namespace ``default`` (kept when it exists)."""
    for name in sim.clusters.clusters:
        cluster = Cluster(
            metadata=Metadata(name=name, namespace=NS, labels=(labels or {}).get(name, {})),
            spec=ClusterSpec(kubeconfig=sim.clusters.kubeconfig(name)),
        )
        try:
            await client.get(Cluster, name, NS)
        except NotFound:
            await client.create(cluster)


async def start_agents(client: ShoalClient, sim: SimServer, **config: Any) -> FleetAgents:
    """Register the sim's clusters and start one registered agent per cluster."""
    await register_clusters(client, sim)
    agents = FleetAgents(client)
    for name in sim.clusters.clusters:
        await agents.start_on(sim, name, **config)
    return agents


def pod(name: str, cpu: str = "100m", memory: str = "128Mi", *, priority: int = 0,
        clusters: list[str] | None = None, near: tuple[float, float] | None = None,
        max_km: float = 10.0, **spec: Any) -> Pod:
    """A fleet pod with one container requesting ``cpu`` and ``memory``."""
    container = Container(name="c", image="nginx",
                          resources=ResourceRequirements(requests={"cpu": cpu, "memory": memory}))
    geo = GeoTarget(latitude=near[0], longitude=near[1], max_distance_km=max_km) if near else None
    return Pod(metadata=Metadata(name=name, namespace=NS),
               spec=PodSpec(containers=[container], priority=priority,
                            placement=Placement(cluster_labels=clusters or [], geo=geo), **spec))
