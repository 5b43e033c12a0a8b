"""Fleet pods: 10 sim clusters × 2,000 nodes, pods at a fixed rate, as a burst, a Cp/Np sweep.

The API, the scheduler and the fleet (the sim clusters with one agent per
cluster, registered through the API) run in processes of their own; this
one creates pods and watches their status.
Latency is the create call to the watch event that says ``Scheduled`` (the
member pod is bound before that status is written). Conflicts are the 409s
in the pods' commit explanations, per commit tried.

    .venv/bin/python bench/fleet.py [--clusters 10] [--nodes 2000] [--rate 600]
        [--pods 3000] [--burst 2000] [--sweep]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import orjson  # noqa: E402
import uvloop  # noqa: E402
import yaml  # noqa: E402

from shoal.agent.agent import connect  # noqa: E402
from shoal.agent.pod import UID_ANNOTATION  # noqa: E402
from shoal.client.rest import ShoalClient, collection_path  # noqa: E402
from shoal.machinery.memory import settle, tune_gc  # noqa: E402
from shoal.machinery.resources import Amounts, add, amounts, pod_requests  # noqa: E402
from shoal.model.kubernetes import Cluster  # noqa: E402
from shoal.model.pods import Pod  # noqa: E402
from shoal.sim.nodes import SITES, mixed_site  # noqa: E402
from shoal.sim.server import start_sim  # noqa: E402
from shoal.testing.launch import ApiProcess, controller, stop  # noqa: E402
from shoal.testing.pods import NS, register_clusters, start_agents  # noqa: E402

Obj = dict[str, Any]
SIZES = [("100m", "128Mi"), ("250m", "256Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi")]


def cpu_seconds(pid: int | None = None) -> float:
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pod_body(name: str, cpu: str, memory: str, hints: dict[str, Any]) -> Obj:
    """A fleet pod as JSON (what ``shoal.testing.pods.pod`` makes, without building models:
    this process shares the CPU it measures)."""
    spec: Obj = {"containers": [{"name": "c", "image": "nginx", "resources": {
        "requests": {"cpu": cpu, "memory": memory}}}]}
    if hints:
        (lat, lon), km = hints["near"], hints["max_km"]
        spec["placement"] = {"cluster_labels": hints["clusters"], "geo": {
            "latitude": lat, "longitude": lon, "max_distance_km": km}}
    return {"api": "scheduling", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


class Run:
    """Creates pods and watches them as plain JSON (no models: the bench's own CPU counts)."""

    def __init__(self, client: ShoalClient) -> None:
        self.client = client
        self.created: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.pods: dict[str, Obj] = {}  # name → status, once no longer Pending
        self.seen: dict[str, float] = {}  # name → its first event here (the create's)
        self.watching = asyncio.Event()

    async def watch(self) -> None:
        """Every pod's changes from now on, until cancelled."""
        url = self.client.url + collection_path(Pod)
        timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
        async with self.client.session.get(url, params={"watch": "", "heartbeat": "10"},
                                           timeout=timeout) as response:
            response.raise_for_status()
            self.watching.set()
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line:
                        self._seen(orjson.loads(line)["object"])

    def _seen(self, pod: Obj) -> None:
        name, status = pod["metadata"]["name"], pod.get("status") or {}
        self.seen.setdefault(name, time.perf_counter())
        if status.get("phase", "Pending") != "Pending" and name not in self.done:
            self.done[name] = time.perf_counter()
            self.pods[name] = status

    async def create(self, names: list[str], rate: float | None, rng: random.Random) -> None:
        gate = asyncio.Semaphore(64)
        path = collection_path(Pod, NS)
        started = time.perf_counter()

        async def one(i: int, name: str) -> None:
            if rate:
                await asyncio.sleep(max(0.0, started + i / rate - time.perf_counter()))
            cpu, memory = rng.choice(SIZES)
            site, where = mixed_site(rng.randrange(len(SITES)))
            hints: dict[str, Any] = {} if rng.random() >= 0.2 else {
                "near": where, "max_km": 50, "clusters": [f"geo is {site}"]}
            async with gate:
                self.created[name] = time.perf_counter()
                await self.client.request("POST", path, body=pod_body(name, cpu, memory, hints))

        await asyncio.gather(*(one(i, n) for i, n in enumerate(names)))

    async def wait(self, names: list[str], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while any(n not in self.done for n in names) and time.perf_counter() < deadline:
            await asyncio.sleep(0.1)

    def report(self, title: str, names: list[str], cpu: float) -> dict[str, Any]:
        finished = [n for n in names if n in self.done]
        lat = sorted(self.done[n] - self.created[n] for n in finished)
        scheduled = [n for n in finished if self.pods[n]["phase"] == "Scheduled"]
        span = (max(self.done[n] for n in finished) - min(self.created[n] for n in names)
                if finished else 0.0)
        tries = conflicts = 0
        for n in finished:
            for line in self.pods[n].get("explanation", {}).get("commit", {}).get("tries", []):
                tries += 1
                conflicts += ": 409" in line
        out: dict[str, Any] = {
               "pods": len(names), "throughput": len(scheduled) / span if span else 0,
               "p50": lat[len(lat) // 2] if lat else 0,
               "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0,
               "conflicts": conflicts / tries if tries else 0,
               "failed": (len(finished) - len(scheduled)) / len(names),
               "unfinished": len(names) - len(finished),
               "cpu_per_1000": cpu / len(names) * 1000, "phases": ""}
        phases = {phase: sorted(self.pods[n].get("timings", {}).get(phase, 0.0)
                                for n in finished)
                  for phase in ("queue", "sampling", "decision", "commit")}
        # the create call and the API's watch (the scheduler's copy comes the same way)
        phases["create"] = sorted(self.seen[n] - self.created[n] for n in finished)
        # the rest of create → seen Scheduled: the create call, the API's watch to the
        # scheduler, the status write and the watch back here
        phases["rest"] = sorted(self.done[n] - self.created[n] - sum(
            self.pods[n].get("timings", {}).get(phase, 0.0)
            for phase in ("queue", "sampling", "decision", "commit")) for n in finished)
        out["phases"] = " ".join(
            f"{k} {v[len(v) // 2] * 1000:.0f}/{v[int(len(v) * .99)] * 1000:.0f}"
            for k, v in phases.items() if v)
        reasons = Counter(self.pods[n].get("reason", "")[:90] for n in finished
                          if self.pods[n]["phase"] == "Failed")
        for reason, count in reasons.most_common(3):
            print(f"    {count} failed: {reason}")
        print(f"{title:<28} {out['throughput']:8.1f} pods/s  p50 {out['p50'] * 1000:7.0f} ms  "
              f"p99 {out['p99'] * 1000:7.0f} ms  conflicts {out['conflicts']:6.2%}  "
              f"failed {out['failed']:6.2%}  unfinished {out['unfinished']}  "
              f"CPU {out['cpu_per_1000']:6.1f} s/1000 pods", flush=True)
        print(f"    phases p50/p99 ms: {out['phases']}")
        return out


async def phase(run: Run, title: str, prefix: str, count: int, rate: float | None,
                procs: list[int], rng: random.Random) -> dict[str, Any]:
    names = [f"{prefix}-{i}" for i in range(count)]
    before = [cpu_seconds(), *(cpu_seconds(p) for p in procs)]
    await run.create(names, rate, rng)
    await run.wait(names, timeout=120)
    after = [cpu_seconds(), *(cpu_seconds(p) for p in procs)]
    used = [*(a - b for a, b in zip(after[:3], before[:3], strict=True)),
            sum(after[3:]) - sum(before[3:])]
    out = run.report(title, names, sum(used))
    shares = ", ".join(f"{who} {u / len(names) * 1000:.1f}" for who, u in
                       zip(("bench", "api", "scheduler", "fleet"), used, strict=True))
    print(f"    CPU s/1000 pods by process: {shares}", flush=True)
    return out


async def audit(client: ShoalClient) -> None:
    """From the member clusters' own lists: nodes whose bound pods ask for more than they
    have, and fleet pods bound more than once (both must be zero)."""
    over = bound = 0
    seen: Counter[str] = Counter()
    for cluster in (await client.list(Cluster, "default")).items:
        kube = await connect(cluster.spec.kubeconfig or {}, 60)
        try:
            nodes = (await kube.request("GET", "/api/v1/nodes"))["items"]
            pods = (await kube.request("GET", "/api/v1/pods"))["items"]
        finally:
            await kube.api.close()
        used: dict[str, Amounts] = {}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            uid = (pod["metadata"].get("annotations") or {}).get(UID_ANNOTATION)
            if node and uid:
                bound += 1
                seen[uid] += 1
                add(used.setdefault(node, {}), pod_requests(pod["spec"]))
        for node in nodes:
            allocatable = amounts(node["status"].get("allocatable"))
            over += any(v > allocatable.get(r, 0) for r, v in used.get(
                node["metadata"]["name"], {}).items())
    twice = sum(1 for n in seen.values() if n > 1)
    print(f"audit: {bound} member pods; over-committed nodes {over}; pods bound twice {twice}")


def targets(out: dict[str, Any]) -> None:
    """The issue's targets for the fixed-rate phase at 20,000 nodes."""
    checks = [("≥ 500 pods/s", out["throughput"] >= 500), ("p99 < 1 s", out["p99"] < 1),
              ("conflicts < 1 %", out["conflicts"] < 0.01),
              ("nothing failed or unfinished", not out["failed"] and not out["unfinished"])]
    print("    targets: " + ", ".join(f"{name} {'met' if ok else 'MISSED'}"
                                      for name, ok in checks))


def scheduler_config(path: Path, cp: float, np_bp: int) -> None:
    fleet = {"clusters_percent": cp, "nodes_bp": np_bp, "samplers": 8, "batch": 64}
    path.write_text(yaml.safe_dump({"scheduler": {"fleet": fleet}}))


async def serve_fleet(api_url: str, clusters: int, nodes: int, prefix: str) -> None:
    """The sim clusters and their agents, until killed (``--serve-fleet``)."""
    sim = await start_sim(clusters=clusters, nodes=nodes, mixed=True, pod_start_delay=3600,
                          name_prefix=prefix)
    labels = {name: {"geo": mixed_site(i)[0]} for i, name in enumerate(sim.clusters.clusters)}
    async with ShoalClient(api_url) as client:
        await register_clusters(client, sim, labels)
        await start_agents(client, sim)
        settle()  # the nodes and caches made so far: never walked by the collector again
        print("ready", flush=True)
        await asyncio.Event().wait()


def spawn_fleet(api_url: str, clusters: int, nodes: int, prefix: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, __file__, "--serve-fleet", api_url, "--clusters", str(clusters),
         "--nodes", str(nodes), "--prefix", prefix], stdout=subprocess.PIPE)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=2000)
    # Above the 500/s target: a sustained rate never exceeds the offered one.
    parser.add_argument("--rate", type=float, default=600)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--sweep", action="store_true", help="Cp/Np table (smaller runs)")
    parser.add_argument("--sweep-pods", type=int, default=1000, help="Pods per sweep burst")
    parser.add_argument("--fleet-procs", type=int, default=2,
                        help="Processes sharing the sim clusters and their agents")
    parser.add_argument("--serve-fleet", metavar="API", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", default="c", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fleet:
        await serve_fleet(args.serve_fleet, args.clusters, args.nodes, args.prefix)
        return
    rng = random.Random(1)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"{args.clusters} clusters × {args.nodes} nodes", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{tmp}/shoal.db", secured=False)
        await api.wait_ready()
        began = time.perf_counter()
        share = [args.clusters // args.fleet_procs + (i < args.clusters % args.fleet_procs)
                 for i in range(args.fleet_procs)]
        fleets = [spawn_fleet(api.url, n, args.nodes, f"f{i}c") for i, n in enumerate(share) if n]
        for fleet in fleets:
            assert fleet.stdout is not None
            if (await asyncio.to_thread(fleet.stdout.readline)).strip() != b"ready":
                raise RuntimeError("a fleet process did not start")
        print(f"sim and agents ready in {time.perf_counter() - began:.1f} s", flush=True)
        try:
            async with ShoalClient(api.url) as client:
                await measure(client, api, [f.pid for f in fleets], args, rng, Path(tmp))
        finally:
            for fleet in fleets:
                stop(fleet)
            api.stop()


async def measure(client: ShoalClient, api: ApiProcess, fleets: list[int],
                  args: argparse.Namespace, rng: random.Random, tmp: Path) -> None:
    run = Run(client)
    task = asyncio.create_task(run.watch())
    await run.watching.wait()
    settings = [(33.0, 200)] + ([(10.0, 200), (33.0, 50), (33.0, 1000), (100.0, 200)]
                                if args.sweep else [])
    for n, (cp, np_bp) in enumerate(settings):
        config = tmp / f"s{n}.yaml"
        scheduler_config(config, cp, np_bp)
        scheduler = controller("scheduler", api.url, "--config", str(config))
        await asyncio.sleep(3)
        procs = [api.proc.pid, scheduler.pid, *fleets]
        try:
            if n == 0:
                targets(await phase(run, f"rate {args.rate:g}/s", "r", args.pods, args.rate,
                                    procs, rng))
                await phase(run, f"burst of {args.burst}", "b", args.burst, None, procs, rng)
                if args.sweep:
                    print(f"\nCp/Np sweep (bursts of {args.sweep_pods})")
            if args.sweep:
                await phase(run, f"Cp {cp:g} % Np {np_bp} bp", f"w{n}", args.sweep_pods, None,
                            procs, rng)
        finally:
            stop(scheduler)
    task.cancel()
    await audit(client)


if __name__ == "__main__":
    tune_gc()  # as every Shoal process (``shoal.system.process``)
    uvloop.run(main())  # as every Shoal process (the fleet processes stand for agents and sims)
