"""Fixtures: two sim clusters (de, fr) registered in an in-process API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterSpec
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.builders import register
from tests.util import member_apis

NS = "default"


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """Two clusters, ``de`` and ``fr``, that ``clusters`` registers; pods start in 0.3 s."""
    return dict(clusters=["de", "fr"], nodes=2, pod_start_delay=0.3)


@pytest.fixture
async def clusters(client: ShoalClient, sim: SimServer) -> list[Cluster]:
    created = []
    for name, location in (("de", "DE"), ("fr", "FR")):
        cluster = Cluster(
            metadata=Metadata(name=name, namespace=NS, labels={"location": location}),
            spec=ClusterSpec(kubeconfig=sim.clusters.kubeconfig(name)),
        )
        created.append(await register(client, cluster))
    return created


@pytest.fixture
async def kube(clusters: list[Cluster]) -> AsyncIterator[dict[str, KubeCluster]]:
    """Direct access to the sim clusters, to check what the controller did there."""
    async with member_apis(clusters, timeout=2.0) as apis:
        yield apis


async def running_on(client: ShoalClient, name: str) -> str | None:
    """The cluster application ``name`` runs on, once it is RUNNING there."""
    app = await client.get(Application, name, NS)
    if app.status.state is ApplicationState.RUNNING and app.status.running_on is not None:
        return app.status.running_on.name
    return None


def deployment(name: str, replicas: int = 2) -> dict[str, Any]:
    return builders.deployment(name, "nginx:1", replicas=replicas)


def application(name: str, labels: list[str] | None = None, replicas: int = 2) -> Application:
    return builders.app(name, labels, namespace=NS, manifest=[deployment(name, replicas)])
