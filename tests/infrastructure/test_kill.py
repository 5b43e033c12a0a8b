"""A controller killed (SIGKILL) mid-create leaves exactly one infrastructure.

The simulator makes the cluster at once but answers the create only 3 s later:
the controller process is killed while it waits, before it could record the
id. A second controller finds that infrastructure under the cluster's key and
finishes it; the simulator then holds one cluster for it, not two.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.infrastructure.controller import key
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.sim.server import SimServer
from shoal.testing.launch import ApiProcess, controller, kill, stop
from shoal.testing.wait import wait_for
from tests.infrastructure.conftest import NS, cluster_on_cloud, provider_objects, sim_clusters

pytestmark = pytest.mark.integration


async def test_killed_mid_create_leaves_exactly_one(
    api_process: ApiProcess, sim: SimServer, tmp_path: Path
) -> None:
    await api_process.wait_ready(timeout=30)
    procs = []
    async with api_process.client() as client:
        try:
            await provider_objects(client, sim)
            procs.append(controller("scheduler", api_process.url, log=tmp_path / "sched.log"))
            first = controller("infrastructure-controller", api_process.url,
                               log=tmp_path / "infra1.log")  # fmt: skip
            procs.append(first)
            sim.clusters.admin_delay = 3.0
            created = await client.create(cluster_on_cloud("edge-1", "DE"))
            name = key(created)

            async def made() -> bool:
                return name in sim.clusters.clusters

            await wait_for(made, timeout=30, interval=0.02, message="the create reached the sim")
            kill(first)  # its create is answered only later: the id is not recorded
            stored = await client.get(Cluster, "edge-1", NS)
            assert stored.status.cluster_id is None
            assert stored.status.state is ClusterState.CREATING

            sim.clusters.admin_delay = 0.0
            procs.append(controller("infrastructure-controller", api_process.url,
                                    log=tmp_path / "infra2.log"))  # fmt: skip
            procs.append(controller("cluster-observer", api_process.url,
                                    log=tmp_path / "observer.log"))  # fmt: skip

            async def online() -> Cluster | None:
                cluster = await client.get(Cluster, "edge-1", NS)
                return cluster if cluster.status.state is ClusterState.ONLINE else None

            built = await wait_for(online, timeout=60, interval=0.1, message="edge-1 ONLINE")
            assert built.status.cluster_id == name
            assert await sim_clusters(sim) == {name: 2}

            # deleting it removes that one infrastructure, then the cluster
            await client.delete(Cluster, "edge-1", NS)

            async def removed() -> bool:
                listed = await client.list(Cluster, NS)
                return not listed.items and not await sim_clusters(sim)

            await wait_for(removed, timeout=60, interval=0.1, message="edge-1 and its sim gone")
        finally:
            for proc in procs:
                stop(proc)
