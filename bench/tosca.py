"""What a cluster's TOSCA template costs the API: latency and CPU per create, and whether
other tenants are served while one is parsed.

``shoal api`` runs in its own process (open, SQLite in a temporary directory).
Measured, one client, one request at a time:

- creates of ``docs/examples/cluster.tosca.yaml`` (2 compute nodes): p50/p99
  latency, and CPU per create of the API process and of its children (the
  confined TOSCA workers, when there are any);
- dry runs of a template of N node templates (the largest the API takes):
  latency, and meanwhile the slowest of a stream of GETs by another client.

    .venv/bin/python bench/tosca.py [--creates 300] [--nodes 500]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import yaml  # noqa: E402

from shoal.testing.launch import ApiProcess  # noqa: E402

TEMPLATE = yaml.safe_load((ROOT / "docs" / "examples" / "cluster.tosca.yaml").read_text())
CLUSTERS = "/kubernetes/namespaces/default/clusters"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(p) for p in (task / "children").read_text().split())
    return found


def cpu_with_children(pid: int) -> float:
    return cpu_seconds(pid) + sum(cpu_seconds(child) for child in children(pid))


def body(name: str, template: dict[str, object]) -> dict[str, object]:
    return {
        "api": "kubernetes",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"tosca": template},
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(creates: int, nodes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        api = ApiProcess(f"sqlite://{tmp}/shoal.db")
        try:
            await api.wait_ready()
            pid = api.proc.pid
            async with aiohttp.ClientSession(api.url) as http:
                async with http.post(CLUSTERS, json=body("first", TEMPLATE)) as answer:
                    assert answer.status == 200, await answer.text()  # starts a worker
                api_before, all_before = cpu_seconds(pid), cpu_with_children(pid)
                took = []
                for index in range(creates):
                    started = time.perf_counter()
                    async with http.post(CLUSTERS, json=body(f"c-{index}", TEMPLATE)) as answer:
                        assert answer.status == 200, await answer.text()
                    took.append(time.perf_counter() - started)
                api_cpu = (cpu_seconds(pid) - api_before) / creates
                all_cpu = (cpu_with_children(pid) - all_before) / creates
                print(f"create, {creates} of a 2-node template: p50 {pct(took, 0.5) * 1e3:.1f} ms,"
                      f" p99 {pct(took, 0.99) * 1e3:.1f} ms; CPU per create: API process "
                      f"{api_cpu * 1e3:.2f} ms, with its workers {all_cpu * 1e3:.2f} ms")
                big = copy.deepcopy(TEMPLATE)
                topology = big["topology_template"]
                workers = topology["node_templates"]["workers"]
                topology["node_templates"] = {f"n-{i}": workers for i in range(nodes)}
                done = asyncio.Event()
                slowest = 0.0

                async def others() -> int:
                    nonlocal slowest
                    count = 0
                    while not done.is_set():
                        started = time.perf_counter()
                        async with http.get(CLUSTERS + "?limit=1") as answer:
                            assert answer.status == 200
                        slowest = max(slowest, time.perf_counter() - started)
                        count += 1
                        await asyncio.sleep(0.01)
                    return count

                async def dry_run() -> float:
                    started = time.perf_counter()
                    try:
                        async with http.post(CLUSTERS, json=body("big", big),
                                             params={"dry_run": "true"}) as answer:
                            await answer.read()
                            assert answer.status in (200, 422), answer.status
                    finally:
                        done.set()
                    return time.perf_counter() - started

                took_big, served = await asyncio.gather(dry_run(), others())
                print(f"dry run of {nodes} node templates: {took_big:.2f} s; meanwhile "
                      f"{served} GETs of another client, the slowest {slowest * 1e3:.0f} ms")
        finally:
            api.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=500)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.creates, arguments.nodes))
