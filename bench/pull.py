"""Pull against push: distribution latency on N member clusters of each mode, and the pull
agents' CPU and memory at rest and under the burst.

Karmada's 100-cluster test shape: each application is one Deployment divided among every
cluster of its mode (``placement.clusters: N``, ``replicas: divided``), created one after
another. Its distribution latency is measured per copy, from the application's create to
its Deployment **on the member cluster**: created there (Karmada's "resource distribution
latency") and ready there (every replica of the share ready). Both are read from each
member's own store (the simulator's, in this process, through its event listeners), not
from the hub's status.

The API (TLS, the security ``shoal up`` ships), the scheduler, the kube controller, the
observer and the ``shoal sim`` fleet (N push and N pull clusters) run in this process. The
pull clusters' agents are the agent's own code (``shoal join``'s ``run_joined``), each with
its own join token, credential, API connection and member connection, ``--per-process`` of
them in each agent process (100 processes of ~125 MiB do not fit this machine).

    PYTHONPATH=$PWD .venv/bin/python bench/pull.py [--clusters 100] [--apps 10] [--rest 10]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from shoal.agent import joining
from shoal.api.server import start_api
from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.machinery.tls import Tls, ca_hash
from shoal.machinery.types import Obj
from shoal.model.kubernetes import Application, Cluster, ClusterState
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import builders, shipped
from shoal.testing.sim import running_sim
from shoal.testing.wait import wait_for

NS = "default"
TICK = os.sysconf("SC_CLK_TCK")
AGENT_MODULES = ("shoal.system.join", "shoal.agent.joining", "shoal.agent.agent",
                 "shoal.agent.copies", "shoal.agent.pull", "shoal.client.rest")  # fmt: skip
"""What ``run_joined`` imports when it starts."""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def quantiles(values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"p50 {statistics.median(values):.2f} s, p99 {p99:.2f} s (n={len(values)})"


# the agents' processes ------------------------------------------------------------------


def spawn_agents(work: Path, index: int, spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    path = work / f"agents-{index}.json"
    path.write_text(json.dumps(spec))
    log = (work / f"agents-{index}.log").open("wb")
    script = Path(__file__).with_name("pull_agents.py")
    return subprocess.Popen([sys.executable, str(script), str(path)],
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def import_rss() -> float:
    """RSS (MiB) of a process that only imported the agent's modules."""
    code = ("import importlib, sys\n"
            f"for m in {AGENT_MODULES!r}: importlib.import_module(m)\n"
            "print([l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ})  # fmt: skip
    return int(out.stdout.strip()) / 1024


# the members' side ------------------------------------------------------------------------


@dataclasses.dataclass
class Members:
    """When each application's Deployment was created, and ready, on each member cluster."""

    created: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    ready: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)

    def listener(self, cluster: str) -> Any:
        def on_event(key: str, etype: str, obj: Obj, old: Obj | None) -> None:
            if not key.endswith("deployments") or etype == "DELETED":
                return
            at = (obj["metadata"]["name"], cluster)
            now = time.monotonic()
            self.created.setdefault(at, now)
            want = (obj.get("spec") or {}).get("replicas", 1)
            if at not in self.ready and (obj.get("status") or {}).get("readyReplicas", 0) >= want:
                self.ready[at] = now

        return on_event


def spread(name: str, site: str, clusters: int, replicas: int) -> Application:
    return Application.model_validate({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"manifest": [builders.deployment(name, "nginx:1", replicas=clusters * replicas)],
                 "constraints": {"cluster": {"labels": [f"site is {site}"]}},
                 "placement": {"clusters": clusters, "spread_by": "location",
                               "replicas": "divided"}},
    })  # fmt: skip


async def burst(admin: ShoalClient, members: Members, site: str, args: argparse.Namespace
                ) -> tuple[list[float], list[float]]:  # fmt: skip
    """Create ``args.apps`` applications on the ``site`` clusters, one each ``interval``:
    the latencies to created and to ready on every member."""
    created: dict[str, float] = {}
    for i in range(args.apps):
        name = f"{site}-{i}"
        created[name] = time.monotonic()
        await admin.create(spread(name, site, args.clusters, args.replicas))
        await asyncio.sleep(args.interval)
    copies = args.apps * args.clusters

    def done() -> bool:
        return sum(1 for (app, _) in members.ready if app in created) >= copies

    await wait_for(done, timeout=900, interval=0.2,
                   message=f"{copies} copies of {site} ready on their members")  # fmt: skip
    to_created = [t - created[a] for (a, _), t in members.created.items() if a in created]
    to_ready = [t - created[a] for (a, _), t in members.ready.items() if a in created]
    return to_created, to_ready


async def main(args: argparse.Namespace) -> None:
    setup = shipped.setup()
    directory = setup.directory
    tls = Tls(directory / "api.crt", directory / "api.key", directory / "ca.crt")
    security = dataclasses.replace(shipped.security(), tls=tls)
    server = await start_api("sqlite://:memory:", security=security)
    ca = (directory / "ca.crt").read_text()

    def client(user: str) -> ShoalClient:
        return ShoalClient(server.url, token=shipped.token(user), ssl_context=joining.trust(ca))

    admin = client("admin")
    parts = [ClusterObserver(client("cluster-observer"), interval=5.0, timeout=10.0),
             KubeController(client("kube-controller")),
             Scheduler(client("scheduler"))]  # fmt: skip
    for part in parts:
        await part.start()
    work = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    n = args.clusters
    push = [f"push-{i}" for i in range(n)]
    pull = [f"pull-{i}" for i in range(n)]
    members = Members()
    agents: list[subprocess.Popen[bytes]] = []
    async with running_sim(clusters=push + pull, nodes=2, cpu="64",
                           pod_start_delay=args.pod_start) as sim:  # fmt: skip
        for name in push + pull:
            sim.clusters.cluster(name).store.listeners.append(members.listener(name))
        for name in push:
            await admin.create(Cluster.model_validate({
                "metadata": {"name": name, "namespace": NS,
                             "labels": {"site": "push", "location": name}},
                "spec": {"kubeconfig": sim.kubeconfig(name)}}))  # fmt: skip
        specs: list[dict[str, Any]] = []
        for i, name in enumerate(pull):
            config = work / f"{name}.yaml"
            config.write_text(yaml.safe_dump(sim.kubeconfig(name)))
            token = (await admin.request("POST", f"/kubernetes/namespaces/{NS}/jointokens",
                                         body={}))["token"]  # fmt: skip
            if i % args.per_process == 0:
                specs.append({"api": server.url, "ca_hash": ca_hash(ca), "agents": []})
            specs[-1]["agents"].append({
                "name": name, "token": token, "kubeconfig": str(config),
                "state_dir": str(work / "state" / name),
                "labels": {"site": "pull", "location": name}})  # fmt: skip
        agents = [spawn_agents(work, i, spec) for i, spec in enumerate(specs)]
        try:

            async def online() -> bool:
                found = (await admin.list(Cluster, NS)).items
                up = [c for c in found if c.status.state is ClusterState.ONLINE]
                return len(up) == 2 * n

            print(f"{len(agents)} agent processes started", flush=True)
            await wait_for(online, timeout=1200, interval=2.0, message=f"{2 * n} clusters ONLINE")
            print("every cluster ONLINE", flush=True)
            await asyncio.sleep(2.0)
            pids = [agent.pid for agent in agents]
            before = sum(cpu_seconds(pid) for pid in pids)
            await asyncio.sleep(args.rest)
            at_rest = (sum(cpu_seconds(pid) for pid in pids) - before) / args.rest
            rest_rss = [rss_mib(pid) for pid in pids]
            push_created, push_ready = await burst(admin, members, "push", args)
            before = sum(cpu_seconds(pid) for pid in pids)
            started = time.monotonic()
            pull_created, pull_ready = await burst(admin, members, "pull", args)
            busy = sum(cpu_seconds(pid) for pid in pids) - before
            took = time.monotonic() - started
            busy_rss = [rss_mib(pid) for pid in pids]
            copies = args.apps * n
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load}")
            print(f"{n} push and {n} pull clusters; {args.apps} applications per mode, each "
                  f"divided among the {n} clusters, one every {args.interval:g} s")
            print(f"  push: created on the member {quantiles(push_created)}; "
                  f"ready there {quantiles(push_ready)}")
            print(f"  pull: created on the member {quantiles(pull_created)}; "
                  f"ready there {quantiles(pull_ready)}")
            per = args.per_process
            print(f"agents: {len(agents)} processes of up to {per} clusters each")
            print(f"  at rest: {at_rest * 100:.1f} % of a core for all {n} "
                  f"({at_rest * 100 / n:.2f} % per cluster); RSS per process "
                  f"{min(rest_rss):.0f}-{max(rest_rss):.0f} MiB "
                  f"({sum(rest_rss) / n:.1f} MiB per cluster); the agent's imports alone "
                  f"{import_rss():.0f} MiB")
            print(f"  under the burst: {busy:.2f} CPU s over {took:.1f} s "
                  f"({busy / copies * 1000:.1f} ms per copy), RSS per process "
                  f"{min(busy_rss):.0f}-{max(busy_rss):.0f} MiB")
        finally:
            for agent in agents:
                agent.terminate()
            for agent in agents:
                agent.wait(30)
            for part in reversed(parts):
                await part.stop()
            await admin.close()
            await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100, help="clusters of each mode")
    parser.add_argument("--apps", type=int, default=10, help="applications of each mode")
    parser.add_argument("--replicas", type=int, default=1, help="replicas per cluster")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="seconds between two creates (Karmada's test: 10)")
    parser.add_argument("--per-process", type=int, default=25, help="agents per process")
    parser.add_argument("--pod-start", type=float, default=0.1,
                        help="seconds a simulated pod takes to start")
    parser.add_argument("--rest", type=float, default=10.0, help="seconds at rest measured")
    asyncio.run(main(parser.parse_args()))
