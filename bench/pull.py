"""Pull against push: create→RUNNING of a burst of applications on one pull cluster (its
agent a ``shoal join`` process) and on one push cluster, and the agent's CPU and memory
at rest and under the burst.

The API (TLS, the security ``shoal up`` ships), the scheduler, the kube controller and the
observer run in this process; the clusters are ``shoal sim`` clusters.

    PYTHONPATH=$PWD .venv/bin/python bench/pull.py [--apps 100] [--rest 10]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from shoal.agent import joining
from shoal.api.server import start_api
from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.machinery.tls import Tls, ca_hash
from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterState
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import builders, launch, shipped
from shoal.testing.sim import running_sim
from shoal.testing.wait import wait_for

NS = "default"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def app_on(name: str, site: str) -> Application:
    return Application.model_validate({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"manifest": [builders.deployment(name, "nginx:1", replicas=1)],
                 "constraints": {"cluster": {"labels": [f"site is {site}"]}}},
    })  # fmt: skip


async def burst(admin: ShoalClient, site: str, apps: int) -> list[float]:
    """create→RUNNING of each of ``apps`` applications created at once on ``site``."""
    created: dict[str, float] = {}
    done: dict[str, float] = {}

    async def create(i: int) -> None:
        name = f"{site}-{i}"
        created[name] = time.monotonic()
        await admin.create(app_on(name, site))

    await asyncio.gather(*(create(i) for i in range(apps)))

    async def all_running() -> bool:
        for app in (await admin.list(Application, NS)).items:
            name = app.metadata.name
            if name in created and name not in done and (
                app.status.state is ApplicationState.RUNNING
            ):
                done[name] = time.monotonic()
        return len(done) == apps

    await wait_for(all_running, timeout=600, interval=0.05)
    return sorted(done[name] - created[name] for name in created)


def quantiles(values: list[float]) -> str:
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"p50 {statistics.median(values):.2f} s, p99 {p99:.2f} s"


async def main(apps: int, rest: float) -> None:
    setup = shipped.setup()
    directory = setup.directory
    tls = Tls(directory / "api.crt", directory / "api.key", directory / "ca.crt")
    security = dataclasses.replace(shipped.security(), tls=tls)
    server = await start_api("sqlite://:memory:", security=security)
    ca = (directory / "ca.crt").read_text()

    def client(user: str) -> ShoalClient:
        return ShoalClient(server.url, token=shipped.token(user), ssl_context=joining.trust(ca))

    admin = client("admin")
    parts = [ClusterObserver(client("cluster-observer"), interval=0.5, timeout=1.0),
             KubeController(client("kube-controller")),
             Scheduler(client("scheduler"))]  # fmt: skip
    for part in parts:
        await part.start()
    work = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    async with running_sim(clusters=[], nodes=4, pod_start_delay=0.1) as sim:
        sim.clusters.add_cluster("edge", 4, cpu="64")
        sim.clusters.add_cluster("core", 4, cpu="64")
        await admin.create(Cluster.model_validate({
            "metadata": {"name": "core", "namespace": NS, "labels": {"site": "core"}},
            "spec": {"kubeconfig": sim.kubeconfig("core")}}))  # fmt: skip
        config = work / "edge.yaml"
        config.write_text(yaml.safe_dump(sim.kubeconfig("edge")))
        token = (await admin.request("POST", f"/kubernetes/namespaces/{NS}/jointokens",
                                     body={}))["token"]  # fmt: skip
        agent = launch.spawn_shoal(
            "join", "--api", server.url, "--name", "edge", "--token", token,
            "--ca-hash", ca_hash(ca), "--kubeconfig", str(config), "-l", "site=edge",
            "--state-dir", str(work / "state"), log=work / "agent.log",
        )  # fmt: skip
        try:

            async def online(name: str) -> bool:
                found = {c.metadata.name: c for c in (await admin.list(Cluster, NS)).items}
                return name in found and found[name].status.state is ClusterState.ONLINE

            await wait_for(lambda: online("edge"), timeout=120)
            await wait_for(lambda: online("core"), timeout=120)
            before = cpu_seconds(agent.pid)
            await asyncio.sleep(rest)
            at_rest = (cpu_seconds(agent.pid) - before) / rest
            rest_rss = rss_mib(agent.pid)
            push = await burst(admin, "core", apps)
            before = cpu_seconds(agent.pid)
            started = time.monotonic()
            pull = await burst(admin, "edge", apps)
            busy = cpu_seconds(agent.pid) - before
            took = time.monotonic() - started
            print(f"{apps} applications at once, create→RUNNING (one cluster each):")
            print(f"  push: {quantiles(push)}")
            print(f"  pull: {quantiles(pull)}")
            print(f"agent at rest: {at_rest * 100:.1f} % of a core, RSS {rest_rss:.0f} MiB")
            print(f"agent under the burst: {busy:.2f} CPU s over {took:.1f} s "
                  f"({busy / apps * 1000:.1f} ms per copy), RSS {rss_mib(agent.pid):.0f} MiB")
        finally:
            launch.stop(agent)
            for part in reversed(parts):
                await part.stop()
            await admin.close()
            await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--rest", type=float, default=10.0, help="seconds at rest measured")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.apps, arguments.rest))
