"""Clusters built on clouds: from create to ONLINE, then deleted, with the sim provider.

``shoal api``, ``shoal sim`` (no clusters), the scheduler, the infrastructure
controller and the cluster observer run as processes of their own, as under
``shoal up``. N clusters (``docs/examples/cluster.tosca.yaml``: 2 nodes) are
created at once by 16 clients, half constrained to the DE cloud, half to FR.
A watch on clusters records when each is bound to its cloud, when it is
CONNECTING (built; the observer's turn) and when ONLINE; the create time is
the client's, taken just before its request.
Then all are deleted, timed until the API has none left.

The simulator itself is audited after each phase (its admin API): after the
builds, exactly one simulated cluster per Shoal cluster, named by that
cluster's key, with 2 nodes; after the deletions, none.

Printed: clusters ONLINE per second, p50/p99 create→bound, →CONNECTING, →ONLINE and
delete→gone, CPU seconds per component per 100 clusters, peak RSS.

    .venv/bin/python bench/clouds.py [--clusters 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import yaml  # noqa: E402

from bench.e2e import components, cpu_snapshot, peak_rss  # noqa: E402
from shoal.client.rest import ShoalClient  # noqa: E402
from shoal.infrastructure.controller import key  # noqa: E402
from shoal.infrastructure.sim import sample_objects  # noqa: E402
from shoal.model.kubernetes import Cluster  # noqa: E402
from shoal.testing.launch import ApiProcess, controller, free_ports, spawn_shoal, stop  # noqa: E402
from shoal.testing.wait import wait_for  # noqa: E402

NS = "default"
TEMPLATE = yaml.safe_load((ROOT / "docs" / "examples" / "cluster.tosca.yaml").read_text())


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def sim_clusters(url: str, token: str) -> dict[str, int]:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.get(f"{url}/admin/clusters") as answer:
            body = await answer.json()
    return {entry["name"]: int(entry["nodes"]) for entry in body["clusters"]}


async def run(n: int, tmp: Path) -> None:
    # figures on the open API, as before (bench/api.py --rbac: the secured door)
    api = ApiProcess(f"sqlite://{tmp / 'shoal.db'}", log=tmp / "api.log", secured=False)
    sim_port = free_ports(1)  # the sim process binds it later
    sim_url = f"http://127.0.0.1:{sim_port}"
    procs = [api.proc, spawn_shoal("sim", "--clusters", "0", "--port", str(sim_port),
                                   "--out", str(tmp / "kube"), log=tmp / "sim.log")]  # fmt: skip
    try:
        await api.wait_ready()

        async def sim_up() -> bool:
            try:
                async with aiohttp.ClientSession() as http:
                    async with http.get(f"{sim_url}/admin/clusters") as answer:
                        return answer.status == 401  # serving, and asking for its token
            except aiohttp.ClientError:
                return False

        await wait_for(sim_up, timeout=30, interval=0.1, message="shoal sim")
        token = (tmp / "kube" / "sim.token").read_text().strip()  # written before it serves
        for name in ("scheduler", "infrastructure-controller", "cluster-observer"):
            procs.append(controller(name, api.url, log=tmp / f"{name}.log"))
        async with ShoalClient(api.url, max_connections=32) as client:
            provider, clouds = sample_objects(sim_url, token=token)
            for obj in (provider, *clouds):
                await client.create(obj)
            await asyncio.sleep(2.0)  # the controllers list and watch before the burst
            names = [f"edge-{i:04d}" for i in range(n)]
            created: dict[str, float] = {}
            bound: dict[str, float] = {}
            connecting: dict[str, float] = {}
            online: dict[str, float] = {}
            keys: dict[str, str] = {}
            since = (await client.list(Cluster, NS)).revision

            async def watch() -> None:
                async for event in client.watch(Cluster, NS, resource_version=since):
                    cluster, now = event.object, time.monotonic()
                    name = cluster.metadata.name
                    if cluster.status.scheduled_to is not None:
                        bound.setdefault(name, now)
                    if cluster.status.state.value == "CONNECTING":
                        connecting.setdefault(name, now)
                    if cluster.status.state.value == "ONLINE":
                        online.setdefault(name, now)
                    if len(online) == n:
                        return

            watcher = asyncio.create_task(watch())
            procs_by_name = components([p.pid for p in procs])
            cpu_before = cpu_snapshot(procs_by_name)
            semaphore = asyncio.Semaphore(16)

            async def create(i: int, name: str) -> None:
                body = Cluster.model_validate({
                    "metadata": {"name": name, "namespace": NS},
                    "spec": {"tosca": TEMPLATE, "constraints": {"cloud": {
                        "labels": [f"location is {'DE' if i % 2 else 'FR'}"]}}},
                })  # fmt: skip
                async with semaphore:
                    created[name] = time.monotonic()
                    made = await client.create(body)
                    keys[name] = key(made)

            start = time.monotonic()
            await asyncio.gather(*(create(i, name) for i, name in enumerate(names)))
            await asyncio.wait_for(watcher, timeout=120 + n)
            elapsed = time.monotonic() - start
            cpu_after = cpu_snapshot(procs_by_name)
            held = await sim_clusters(sim_url, token)
            doubled = sorted(set(held) - set(keys.values()))
            missing = sorted(set(keys.values()) - set(held))
            wrong = sorted(k for k in keys.values() if held.get(k) not in (None, 2))
            to_bound = [bound[c] - created[c] for c in names]
            to_connecting = [connecting.get(c, online[c]) - created[c] for c in names]
            to_online = [online[c] - created[c] for c in names]
            print(f"{n} clusters built in {elapsed:.2f} s: {n / elapsed:.1f} clusters ONLINE/s")
            print(f"  create→bound  p50 {statistics.median(to_bound) * 1000:.0f} ms, "
                  f"p99 {pct(to_bound, 0.99) * 1000:.0f} ms")
            print(f"  create→CONNECTING (built) p50 {statistics.median(to_connecting) * 1000:.0f} "
                  f"ms, p99 {pct(to_connecting, 0.99) * 1000:.0f} ms")
            print(f"  create→ONLINE p50 {statistics.median(to_online) * 1000:.0f} ms, "
                  f"p99 {pct(to_online, 0.99) * 1000:.0f} ms")
            print("  CPU s per 100 clusters: " + ", ".join(
                f"{name} {(cpu_after[name] - cpu_before.get(name, 0)) * 100 / n:.2f}"
                for name in sorted(cpu_after)))  # fmt: skip
            print(f"  audit of the simulator: {len(held)} clusters; not Shoal's "
                  f"{len(doubled)}, missing {len(missing)}, not 2 nodes {len(wrong)}")

            deleted: dict[str, float] = {}
            start = time.monotonic()

            async def delete(name: str) -> None:
                async with semaphore:
                    deleted[name] = time.monotonic()
                    await client.delete(Cluster, name, NS)

            await asyncio.gather(*(delete(name) for name in names))

            async def all_gone() -> bool:
                return not (await client.list(Cluster, NS)).items

            await wait_for(all_gone, timeout=120 + n, interval=0.05, message="all deleted")
            gone_in = time.monotonic() - start
            left = await sim_clusters(sim_url, token)
            print(f"{n} clusters deleted in {gone_in:.2f} s: {n / gone_in:.1f} clusters/s; "
                  f"simulated clusters left {len(left)}")
            print("  peak RSS MiB: " + ", ".join(
                f"{name} {rss}" for name, rss in sorted(peak_rss(procs_by_name).items())))
    finally:
        for proc in reversed(procs):
            stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shoal-clouds-") as tmp:
        asyncio.run(run(args.clusters, Path(tmp)))


if __name__ == "__main__":
    main()
