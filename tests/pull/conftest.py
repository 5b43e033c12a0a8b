"""A hub (the API with the security ``shoal up --tls`` ships, and its control plane in
process) and ``shoal sim`` clusters joining it with ``shoal join`` as real processes: the
hub holds no kubeconfig of them, their agents run their copies."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from shoal.agent import joining
from shoal.api.server import ApiServer, start_api
from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.machinery.tls import Tls, ca_hash
from shoal.machinery.types import Obj
from shoal.model.kubernetes import Cluster, ClusterSpec, ClusterState
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.sim.server import SimServer
from shoal.testing import launch, shipped
from shoal.testing.wait import wait_for
from tests.scheduler.helpers import fast_config
from tests.util import all_started

NS = "default"
LEASE = 3.0  # seconds without a heartbeat before a pull cluster is OFFLINE


@dataclasses.dataclass
class Hub:
    server: ApiServer | launch.ApiProcess  # a process where the API is restarted
    admin: ShoalClient
    ca: str
    directory: Path
    store: str
    security: Any
    controller: KubeController | None = None

    def client(self, user: str) -> ShoalClient:
        return ShoalClient(self.server.url, token=shipped.token(user),
                           ssl_context=joining.trust(self.ca))  # fmt: skip

    async def token(self) -> str:
        answer = await self.admin.request("POST", f"/kubernetes/namespaces/{NS}/jointokens",
                                          body={})  # fmt: skip
        return str(answer["token"])

    async def state(self, name: str) -> ClusterState:
        return (await self.admin.get(Cluster, name, NS)).status.state


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    """The API on TLS as ``shoal up --tls`` serves it, with the scheduler, the kube
    controller and the observer (short lease) in this process."""
    setup = shipped.setup()
    directory = setup.directory
    tls = Tls(directory / "api.crt", directory / "api.key", directory / "ca.crt")
    security = dataclasses.replace(shipped.security(), tls=tls)
    store = f"sqlite://{tmp_path / 'shoal.db'}"
    server = await start_api(store, security=security)
    ca = (directory / "ca.crt").read_text()
    admin = ShoalClient(server.url, token=shipped.token("admin"), ssl_context=joining.trust(ca))
    hub = Hub(server, admin, ca, directory, store, security)
    clients = [hub.client(user) for user in ("cluster-observer", "kube-controller", "scheduler")]
    observer = ClusterObserver(clients[0], interval=0.3, timeout=0.5, lease=LEASE)
    controller = KubeController(clients[1], poll_interval=0.2, timeout=1.0)
    scheduler = Scheduler(clients[2], fast_config())
    hub.controller = controller
    try:
        async with all_started(observer, controller, scheduler):
            yield hub
    finally:
        for client in clients:
            await client.close()
        await admin.close()
        await hub.server.stop()


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """No cluster at first: each member adds its own."""
    return dict(clusters=[], nodes=2, pod_start_delay=0.1)


@dataclasses.dataclass
class Member:
    """A member cluster joined in pull mode: its agent (``shoal join``) and its own API."""

    name: str
    sim: SimServer
    hub: Hub
    kubeconfig: Path
    state_dir: Path
    log: Path
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    log_level: str = "info"

    def start(self, token: str | None = None) -> None:
        args = ["join", "--api", self.hub.server.url, "--name", self.name,
                "--kubeconfig", str(self.kubeconfig), "--state-dir", str(self.state_dir),
                "--every", "0.3", "--log-level", self.log_level]  # fmt: skip
        if token is not None:
            args += ["--token", token, "--ca-hash", ca_hash(self.hub.ca)]
            for key, value in self.labels.items():
                args += ["-l", f"{key}={value}"]
        self.process = launch.spawn_shoal(*args, log=self.log)

    def kill(self) -> None:
        if self.process is not None:
            launch.kill(self.process)
            self.process.wait()
            self.process = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def requests(self) -> list[dict[str, Any]]:
        """The member cluster's own log of who called its Kubernetes API."""
        async with httpx.AsyncClient(base_url=self.sim.url, headers=self.sim.admin_headers) as h:
            answer = await h.get(f"/admin/clusters/{self.name}/requests")
            answer.raise_for_status()
            return list(answer.json()["requests"])

    async def kubectl(self, *args: str) -> Obj | None:
        """``kubectl -o json`` with the member's own kubeconfig (None: not found)."""
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(self.kubeconfig), *args, "-o", "json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip (the simulated cluster answers from this process's loop)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            if b"NotFound" in err or b"not found" in err:
                return None
            raise AssertionError(err.decode())
        data: Obj = yaml.safe_load(out)
        return data


@pytest.fixture
def members(hub: Hub, sim: SimServer, tmp_path: Path) -> Iterator[Any]:
    """``join(name)``: a new sim cluster joined with a fresh token, its agent a process."""
    made: list[Member] = []

    async def join(name: str, **labels: str) -> Member:
        sim.clusters.add_cluster(name, 2, cpu="8")
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(sim.kubeconfig(name)))
        member = Member(name, sim, hub, config, tmp_path / f"{name}-state",
                        tmp_path / f"{name}.log", labels)  # fmt: skip
        made.append(member)
        member.start(await hub.token())
        await wait_for(lambda: online(hub, name), timeout=60)
        return member

    yield join
    for member in made:
        member.kill()


async def online(hub: Hub, name: str) -> bool:
    with contextlib.suppress(Exception):
        return await hub.state(name) is ClusterState.ONLINE
    return False


async def push_cluster(hub: Hub, sim: SimServer, name: str, **labels: str) -> Cluster:
    """A push cluster: the hub holds its kubeconfig."""
    sim.clusters.add_cluster(name, 2, cpu="8")
    cluster = Cluster.model_validate({"metadata": {"name": name, "namespace": NS,
                                                   "labels": labels},
                                      "spec": ClusterSpec(kubeconfig=sim.kubeconfig(name))})
    return await hub.admin.create(cluster)


@contextlib.asynccontextmanager
async def member_api(sim: SimServer, name: str) -> AsyncIterator[KubeCluster]:
    clients = KubeClients(timeout=1.0)
    try:
        cluster = Cluster.model_validate({"metadata": {"name": name, "namespace": NS},
                                          "spec": {"kubeconfig": sim.kubeconfig(name)}})
        yield await clients.get(cluster)
    finally:
        await clients.close()


def pids_of_this_process() -> set[int]:
    return {os.getpid()}
