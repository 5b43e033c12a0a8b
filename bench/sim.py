"""shoal sim at scale: start-up time and memory of a 5,000-node cluster, list latency.

Run: .venv/bin/python bench/sim.py [--nodes 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from shoal.sim.server import start_sim


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(nodes: int, rounds: int) -> None:
    before = rss_mib()
    t0 = time.perf_counter()
    sim = await start_sim(clusters=["big"], nodes=nodes)
    started = time.perf_counter() - t0
    after = rss_mib()
    print(f"start-up of a {nodes}-node cluster: {started:.2f} s")
    print(f"RSS: {before:.0f} MiB before, {after:.0f} MiB after (+{after - before:.0f} MiB)")
    token = sim.clusters.cluster("big").token
    async with httpx.AsyncClient(base_url=f"{sim.url}/clusters/big", timeout=60,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        for label, params, headers in [
            ("full JSON list", {}, {}),
            ("limit=500 page", {"limit": "500"}, {}),
            ("limit=500 Table page (kubectl)", {"limit": "500"},
             {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}),
        ]:
            times = []
            for _ in range(rounds):
                t = time.perf_counter()
                r = await client.get("/api/v1/nodes", params=params, headers=headers)
                r.raise_for_status()
                times.append((time.perf_counter() - t) * 1000)
            times.sort()
            print(f"list nodes, {label}: p50 {statistics.median(times):.1f} ms, "
                  f"p99 {times[int(len(times) * 0.99) - 1 if len(times) > 1 else 0]:.1f} ms, "
                  f"{len(r.content) / 1e6:.1f} MB")
    kubectl = shutil.which("kubectl")
    if kubectl:
        with tempfile.TemporaryDirectory() as tmp:
            paths = sim.clusters.write_kubeconfigs(tmp)
            times = []
            for _ in range(3):
                t = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(
                    kubectl, "--kubeconfig", str(paths["big"]), "--cache-dir",
                    str(Path(tmp) / "cache"), "get", "nodes",
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                out, _ = await proc.communicate()
                times.append(time.perf_counter() - t)
            rows = out.count(b"\n") - 1
            print(f"kubectl get nodes ({rows} rows): "
                  f"{min(times):.2f} s best of 3, {times[0]:.2f} s cold")
    await sim.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.rounds))
