"""``shoal agent``, the process as an operator starts it (assembled in ``shoal.system``):
with ``--cluster`` it reads the kubeconfig through the secured API with the agent's own
token, serves, keeps its URL in the cluster's status and takes it back when stopped; with
``--kubeconfig`` it serves without any API."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Cluster, ClusterSpec
from shoal.sim.server import SimServer
from shoal.testing import launch, shipped
from tests.agent.conftest import CLUSTER
from tests.util import wait_for


async def _healthy(url: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=5) as agent_http:
            return (await agent_http.get(f"{url}/healthz")).status_code == 200
    except httpx.HTTPError:
        return False


async def test_an_agent_of_a_registered_cluster_registers_and_unregisters(
    api: ApiServer, client: ShoalClient, sim: SimServer
) -> None:
    spec = ClusterSpec(kubeconfig=sim.clusters.kubeconfig(CLUSTER))
    await client.create(Cluster(metadata=Metadata(name=CLUSTER, namespace="default"), spec=spec))
    port = launch.free_port()
    process = launch.spawn_shoal(
        "agent", "--cluster", CLUSTER, "--api", api.url, "--port", str(port),
        "--log-level", "warning", env={"SHOAL_TOKEN": shipped.token("agent")},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:

        async def registered() -> bool:
            found = await client.get(Cluster, CLUSTER, "default")
            return found.status.agent == url

        await wait_for(registered, timeout=60, interval=0.2, message="agent registered")
        assert await _healthy(url)
    finally:
        code = await launch.terminate(process)
    assert code == 0

    async def unregistered() -> bool:
        return (await client.get(Cluster, CLUSTER, "default")).status.agent == ""

    await wait_for(unregistered, timeout=30, interval=0.2, message="agent unregistered")


async def test_an_agent_on_a_kubeconfig_file_serves_without_the_api(
    sim: SimServer, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "member.yaml"
    kubeconfig.write_text(yaml.safe_dump(sim.clusters.kubeconfig(CLUSTER)))
    port = launch.free_port()
    process = launch.spawn_shoal(
        "agent", "--kubeconfig", str(kubeconfig), "--port", str(port), "--log-level", "warning"
    )
    try:
        await wait_for(lambda: _healthy(f"http://127.0.0.1:{port}"), timeout=60, interval=0.2)
        assert process.poll() is None
    finally:
        code = await launch.terminate(process)
    assert code == 0
