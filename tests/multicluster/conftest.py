"""Fixtures: four sim clusters (two DE, two FR) under the whole control plane, in process.

The scheduler, the kube controller and the cluster observer run against an
in-process API; what runs is read from the member clusters themselves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, Cluster, ClusterSpec
from shoal.sim.server import SimServer
from shoal.testing import builders
from tests.util import member_apis

NS = "default"
CLUSTERS = {"de-1": "DE", "de-2": "DE", "fr-1": "FR", "fr-2": "FR"}


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """No cluster at first: ``clusters`` adds them with the sizes a test asks for."""
    return dict(clusters=[], nodes=2, pod_start_delay=0.2)


@pytest.fixture
def sizes() -> dict[str, str]:
    """Each cluster's cpu per node (a test overrides it to give clusters different room)."""
    return {}


@pytest.fixture
async def clusters(
    client: ShoalClient, sim: SimServer, sizes: dict[str, str]
) -> list[Cluster]:
    created = []
    for name, location in CLUSTERS.items():
        sim.clusters.add_cluster(name, 2, cpu=sizes.get(name, "8"))
        tier = "primary" if name.endswith("-1") else "backup"
        cluster = Cluster(
            metadata=Metadata(
                name=name, namespace=NS, labels={"location": location, "tier": tier}
            ),
            spec=ClusterSpec(kubeconfig=sim.kubeconfig(name)),
        )
        created.append(await client.create(cluster))
    return created


@pytest.fixture
async def kube(clusters: list[Cluster]) -> AsyncIterator[dict[str, KubeCluster]]:
    """Direct access to the member clusters, to check what runs there."""
    async with member_apis(clusters, timeout=1.0) as apis:
        yield apis


@pytest.fixture
def control_plane_options(clusters: list[Cluster]) -> dict[str, Any]:
    """The suite's control plane, started once the clusters are registered."""
    return {}


def spread_app(name: str, replicas: int, placement: dict[str, Any], **spec: Any) -> Application:
    deployment = builders.deployment(name, "nginx:1", replicas=replicas)
    return builders.app(name, namespace=NS, manifest=[deployment], placement=placement, **spec)


async def replicas_on(kube: dict[str, KubeCluster], name: str) -> dict[str, tuple[int, int]]:
    """(spec replicas, ready replicas) of Deployment ``name`` on each cluster that has it,
    read from the member clusters; a cluster that does not answer is left out."""
    found: dict[str, tuple[int, int]] = {}
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}
    for cluster, api in kube.items():
        try:
            live = await api.read(ref, NS)
        except Exception:  # unreachable on purpose: a test's fault
            continue
        if live is not None:
            ready = int((live.get("status") or {}).get("readyReplicas") or 0)
            found[cluster] = (int(live["spec"]["replicas"]), ready)
    return found
