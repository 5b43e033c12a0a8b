"""Pull against push: distribution latency on N member clusters of each mode, and the pull
agents' CPU and memory at rest and under the burst.

Karmada's 100-cluster test shape: each application is one Deployment divided among every
cluster of its mode (``placement.clusters: N``, ``replicas: divided``), created one after
another. Its distribution latency is measured per copy, from the application's create to
its Deployment **on the member cluster**: created there (Karmada's "resource distribution
latency") and ready there (every replica of the share ready). Both are read from each
member's own Kubernetes API, a watch of its Deployments per member, as any kube client
would, never from the hub's status.

Shoal runs as in production, each part a process of its own (as ``shoal up`` and
``bench/e2e.py --mode processes`` run it): ``shoal api`` (TLS, the security ``shoal up``
ships, on a SQLite file), ``shoal scheduler``, ``shoal kube-controller``, ``shoal
cluster-observer`` and ``shoal garbage-collector``; ``shoal sim`` serves the N push and N
pull clusters on one port. The pull clusters' agents are the agent's own code (``shoal
join``'s ``run_joined``), each with its own join token, credential, API connection and
member connection, ``--per-process`` of them in each agent process (100 processes of
~125 MiB do not fit this machine). This process only creates the applications and reads
the members.

    PYTHONPATH=$PWD .venv/bin/python bench/pull.py [--clusters 100] [--apps 10] [--rest 10]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.schedule import start_profiles, stop_profiles
from shoal.agent import joining
from shoal.client.rest import ShoalClient
from shoal.machinery.tls import ca_hash
from shoal.machinery.types import Obj
from shoal.model.kubernetes import Application, Cluster, ClusterState
from shoal.sim.cli import ENV_TOKEN
from shoal.testing import builders, shipped
from shoal.testing.launch import ApiProcess, controller, free_ports, spawn_shoal, stop
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
    """When each application's Deployment was created, and ready, on each member cluster:
    seen by a watch of Deployments on each member's own Kubernetes API."""

    created: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    ready: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)

    def seen(self, cluster: str, obj: Obj) -> None:
        at = (obj["metadata"]["name"], cluster)
        now = time.monotonic()
        self.created.setdefault(at, now)
        want = (obj.get("spec") or {}).get("replicas", 1)
        if at not in self.ready and (obj.get("status") or {}).get("readyReplicas", 0) >= want:
            self.ready[at] = now

    async def watch(self, http: aiohttp.ClientSession, cluster: str, kubeconfig: Obj) -> None:
        """Follow the member's Deployments until cancelled, resuming where a watch ended."""
        server = kubeconfig["clusters"][0]["cluster"]["server"]
        headers = {"Authorization": f"Bearer {kubeconfig['users'][0]['user']['token']}"}
        url = f"{server}/apis/apps/v1/namespaces/{NS}/deployments"
        version = ""
        while True:
            params = {"watch": "1", "allowWatchBookmarks": "true"}
            if version:
                params["resourceVersion"] = version
            try:
                async with http.get(url, params=params, headers=headers) as answer:
                    answer.raise_for_status()
                    async for line in answer.content:
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self.seen(cluster, obj)
                        elif event.get("type") == "ERROR":
                            version = ""  # gone: from now on
            except (aiohttp.ClientError, TimeoutError) as error:
                print(f"watch of {cluster}: {error!r}", flush=True)
                await asyncio.sleep(0.5)


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


class Processes:
    """Each of Shoal's processes by name, and the CPU seconds each has spent."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(p.pid) for name, p in self.procs.items() if p.poll() is None}

    def stop(self) -> None:
        for proc in reversed(self.procs.values()):
            stop(proc)


def cpu_line(before: dict[str, float], after: dict[str, float], took: float) -> str:
    """CPU seconds each process spent between two readings, the agents' processes summed."""
    spent: dict[str, float] = {}
    for name, t in after.items():
        key = "agents" if name.startswith("agents-") else name
        spent[key] = spent.get(key, 0.0) + t - before.get(name, t)
    busy = ", ".join(f"{k} {v:.2f}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1]))
    return f"CPU s over {took:.0f} s: {busy}"


async def start_sim(work: Path, procs: Processes, names: list[str], pod_start: float
                    ) -> dict[str, Obj]:  # fmt: skip
    """``shoal sim`` in a process of its own serving every cluster in ``names`` (two nodes
    of 64 cpu each) on one port: their kubeconfigs, by name."""
    port = free_ports(1)
    token = secrets.token_urlsafe(24)
    procs.procs["sim"] = spawn_shoal(
        "sim", "--clusters", "0", "--port", str(port), "--out", str(work / "kubeconfigs"),
        log=work / "sim.log", env={ENV_TOKEN: token},
    )  # fmt: skip
    admin = f"http://127.0.0.1:{port}/admin/clusters"
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:

        async def answers() -> bool:
            try:
                async with http.get(admin) as answer:
                    return answer.status == 200
            except aiohttp.ClientError:
                return False

        await wait_for(answers, timeout=60, interval=0.2, message="shoal sim")
        configs: dict[str, Obj] = {}
        for name in names:
            body = {"name": name, "nodes": 2, "cpu": "64", "pod_start_delay": pod_start}
            async with http.post(admin, json=body) as answer:
                answer.raise_for_status()
                configs[name] = (await answer.json())["kubeconfig"]
    return configs


async def main(args: argparse.Namespace) -> None:
    directory = shipped.setup().directory
    ca_file = directory / "ca.crt"
    ca = ca_file.read_text()
    work = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    n = args.clusters
    push = [f"push-{i}" for i in range(n)]
    pull = [f"pull-{i}" for i in range(n)]
    procs = Processes()
    members = Members()
    watches: list[asyncio.Task[None]] = []
    forever = aiohttp.ClientTimeout(total=None, sock_connect=10)  # the watches stay open
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=forever)
    admin: ShoalClient | None = None
    try:
        api = ApiProcess(f"sqlite://{work / 'shoal.db'}", tls=True, kube_finalizer=True,
                         log=work / "api.log")  # fmt: skip
        procs.procs["api"] = api.proc
        configs = await start_sim(work, procs, push + pull, args.pod_start)
        await api.wait_ready(timeout=60)
        for name in ("scheduler", "kube-controller", "cluster-observer", "garbage-collector"):
            procs.procs[name] = controller(name, api.url, ca=ca_file, log=work / f"{name}.log")
        admin = ShoalClient(api.url, token=shipped.token("admin"), ssl_context=joining.trust(ca))
        watches = [asyncio.create_task(members.watch(http, name, configs[name]))
                   for name in push + pull]  # fmt: skip
        for name in push:
            await admin.create(Cluster.model_validate({
                "metadata": {"name": name, "namespace": NS,
                             "labels": {"site": "push", "location": name}},
                "spec": {"kubeconfig": configs[name]}}))  # fmt: skip
        specs: list[dict[str, Any]] = []
        for i, name in enumerate(pull):
            config = work / f"{name}.yaml"
            config.write_text(yaml.safe_dump(configs[name]))
            token = (await admin.request("POST", f"/kubernetes/namespaces/{NS}/jointokens",
                                         body={}))["token"]  # fmt: skip
            if i % args.per_process == 0:
                specs.append({"api": api.url, "ca_hash": ca_hash(ca), "agents": []})
            specs[-1]["agents"].append({
                "name": name, "token": token, "kubeconfig": str(config),
                "state_dir": str(work / "state" / name),
                "labels": {"site": "pull", "location": name}})  # fmt: skip
        for i, spec in enumerate(specs):
            procs.procs[f"agents-{i}"] = spawn_agents(work, i, spec)
        agents = [p for name, p in procs.procs.items() if name.startswith("agents-")]
        pids = [agent.pid for agent in agents]
        print(f"pids: {', '.join(f'{k} {p.pid}' for k, p in procs.procs.items())}; "
              f"logs in {work}", flush=True)  # fmt: skip

        async def online() -> bool:
            found = (await admin.list(Cluster, NS)).items
            up = [c for c in found if c.status.state is ClusterState.ONLINE]
            return len(up) == 2 * n

        await wait_for(online, timeout=1200, interval=2.0, message=f"{2 * n} clusters ONLINE")
        print("every cluster ONLINE", flush=True)
        await asyncio.sleep(2.0)
        before = sum(cpu_seconds(pid) for pid in pids)
        await asyncio.sleep(args.rest)
        at_rest = (sum(cpu_seconds(pid) for pid in pids) - before) / args.rest
        rest_rss = [rss_mib(pid) for pid in pids]
        profiled = {name: p.pid for name, p in procs.procs.items()}
        cpu, started = procs.cpu(), time.monotonic()
        profilers = start_profiles(profiled, args.py_spy, "pull-bench-push")
        push_created, push_ready = await burst(admin, members, "push", args)
        stop_profiles(profilers)
        push_cpu = cpu_line(cpu, procs.cpu(), time.monotonic() - started)
        before = sum(cpu_seconds(pid) for pid in pids)
        cpu, started = procs.cpu(), time.monotonic()
        profilers = start_profiles(profiled, args.py_spy, "pull-bench-pull")
        pull_created, pull_ready = await burst(admin, members, "pull", args)
        stop_profiles(profilers)
        took = time.monotonic() - started
        pull_cpu = cpu_line(cpu, procs.cpu(), took)
        busy = sum(cpu_seconds(pid) for pid in pids) - before
        busy_rss = [rss_mib(pid) for pid in pids]
        copies = args.apps * n
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load}")
        print(f"{n} push and {n} pull clusters; {args.apps} applications per mode, each "
              f"divided among the {n} clusters, one every {args.interval:g} s")
        print(f"  push: created on the member {quantiles(push_created)}; "
              f"ready there {quantiles(push_ready)}")
        print(f"    {push_cpu}")
        print(f"  pull: created on the member {quantiles(pull_created)}; "
              f"ready there {quantiles(pull_ready)}")
        print(f"    {pull_cpu}")
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
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        await http.close()
        if admin is not None:
            await admin.close()
        procs.stop()


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
    parser.add_argument("--py-spy", default="", help="processes to profile during each burst, "
                        "e.g. api,agents-0 (/tmp/pull-bench-{push,pull}-NAME.txt, folded)")
    asyncio.run(main(parser.parse_args()))
