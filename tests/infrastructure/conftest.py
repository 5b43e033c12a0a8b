"""Fixtures: clouds whose clusters the ``sim`` provider builds, under the whole control plane.

Two clouds (DE, FR) name a ``sim`` provider on a running ``shoal sim``; the
scheduler binds clusters to them, the infrastructure controller builds them,
the observer and the kube controller take them over. What exists is read from
the simulator itself (its admin API) and from the built clusters' own API.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from shoal.client.rest import ShoalClient
from shoal.infrastructure.controller import InfrastructureController
from shoal.infrastructure.sim import sample_objects
from shoal.model.infrastructure import (
    CloudSpec,
    InfrastructureProviderRef,
    OpenstackAuth,
    OpenstackSpec,
    PasswordAuth,
    PasswordProject,
    PasswordUser,
)
from shoal.model.kubernetes import Cluster
from shoal.sim.server import SimServer
from shoal.testing.launch import free_ports, stop
from shoal.testing.wait import wait_for
from tests.conftest import ClientOf

NS = "default"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "cluster.tosca.yaml"


def template(workers: int = 2) -> dict[str, Any]:
    """docs/examples/cluster.tosca.yaml with ``workers`` nodes."""
    loaded = yaml.safe_load(EXAMPLE.read_text())
    tosca = copy.deepcopy(loaded)
    scalable = tosca["topology_template"]["node_templates"]["workers"]["capabilities"]["scalable"]
    scalable["properties"]["default_instances"] = workers
    return dict(tosca)


def openstack_via(provider: str, namespaced: bool = False) -> CloudSpec:
    """An OpenStack cloud built through the infrastructure provider ``provider``; its
    Keystone (a closed port) and login are never used, the provider builds the clusters."""
    return CloudSpec(openstack=OpenstackSpec(
        url="http://127.0.0.1:9/v3",
        auth=OpenstackAuth(password=PasswordAuth(
            user=PasswordUser(username="u", password="p"), project=PasswordProject(name="t"),
        )),
        infrastructure_provider=InfrastructureProviderRef(name=provider, namespaced=namespaced),
    ))  # fmt: skip


def cluster_on_cloud(name: str, location: str, tosca: dict[str, Any] | None = None,
                     **labels: str) -> Cluster:  # fmt: skip
    return Cluster.model_validate({
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"tosca": tosca or template(),
                 "constraints": {"cloud": {"labels": [f"location is {location}"]}}},
    })  # fmt: skip


async def provider_objects(client: ShoalClient, sim: SimServer) -> None:
    """The ``sim`` provider and the clouds cloud-de and cloud-fr (no metrics)."""
    provider, clouds = sample_objects(sim.url, token=sim.admin_token)
    for obj in (provider, *clouds):
        await client.create(obj)


async def sim_clusters(sim: SimServer) -> dict[str, int]:
    """Every cluster the simulator holds and its node count, from its admin API."""
    async with aiohttp.ClientSession(headers=sim.admin_headers) as http:
        async with http.get(f"{sim.url}/admin/clusters") as answer:
            body = await answer.json()
    return {entry["name"]: int(entry["nodes"]) for entry in body["clusters"]}


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """No cluster at first: the infrastructure controller creates them on the sim provider."""
    return dict(clusters=[], nodes=2, pod_start_delay=0.2)


@pytest.fixture
async def clouds(client: ShoalClient, sim: SimServer) -> None:
    await provider_objects(client, sim)


@pytest.fixture
def control_plane_options(clouds: None) -> dict[str, Any]:
    """The control plane and the infrastructure controller, once the clouds exist."""

    def infrastructure(client_of: ClientOf) -> InfrastructureController:
        return InfrastructureController(
            client_of("infrastructure-controller"), poll=0.2, timeout=1.0, retry_cap=1.0
        )

    return {"more": [infrastructure]}


@pytest.fixture
def im_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """IM's server (installed by ``scripts/im-env``) on a free port, and its URL."""
    python = subprocess.run(
        [str(ROOT / "scripts" / "im-env")], capture_output=True, text=True, check=True
    ).stdout.strip()
    port = free_ports(1)  # IM's process binds it later
    with open(tmp_path / "im.out", "ab") as log:
        proc = subprocess.Popen(
            [python, str(Path(__file__).with_name("im_server.py")), str(port), str(tmp_path)],
            stdout=log, stderr=log, cwd=tmp_path,
        )  # fmt: skip
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@pytest.fixture
async def im_url(im_process: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> str:
    proc, url = im_process

    async def up() -> bool:
        assert proc.poll() is None, (tmp_path / "im.out").read_text()
        try:
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{url}/version") as answer:
                    return answer.status == 200
        except aiohttp.ClientError:
            return False

    await wait_for(up, timeout=60, interval=0.2, message="IM's REST server")
    return url
