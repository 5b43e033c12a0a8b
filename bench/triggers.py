"""A relabelled cluster's applications move at once, not at the next periodic re-check.

The API (SQLite WAL file in a temp dir) and the scheduler run in processes of
their own, the scheduler with ``reschedule_after: 600`` so that only the
relabel itself can move anything. Both figures are read on the API's clock:
from the relabel's ``metadata.modified`` to the application's
``status.scheduled`` (set when it is bound to another cluster).

- **latency**: one application with ``zone is x`` on two clusters of zone x;
  each trial relabels the one it is on to zone y (the other is relabelled back
  to x first) and times the move; p50/p99/max over ``--trials``;
- **bulk**: ``--apps`` applications on cluster ``a``; cluster ``b`` appears,
  ``a`` is relabelled: the time until the last one is bound to ``b``, with the
  CPU seconds of the API, the scheduler and this bench meanwhile (its polls read
  JSON once a second, so that they do not take the CPU the move needs).

    .venv/bin/python bench/triggers.py [--trials 100] [--apps 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.e2e import cpu_seconds  # noqa: E402
from bench.reschedule import applications, placement  # noqa: E402
from shoal.client.rest import Conflict, ShoalClient  # noqa: E402
from shoal.model.kubernetes import Application, Cluster  # noqa: E402
from shoal.testing.builders import app, cluster, register  # noqa: E402
from shoal.testing.launch import ApiProcess, controller, stop  # noqa: E402

NS = "default"
CONFIG = {"reschedule_after": 600, "metrics_refresh": 5.0}


async def placed(client: ShoalClient) -> tuple[Counter[str], list[dict[str, Any]]]:
    """Applications of the bulk (named a…) per cluster, and the applications.

    Read as JSON, not models: validating 10,000 applications per poll took a core of
    the 2 the API and the scheduler share, and the move it timed waited for CPU.
    """
    apps = [a for a in await applications(client) if a["metadata"]["name"].startswith("a")]
    return placement(apps), apps


async def relabel(client: ShoalClient, name: str, zone: str) -> datetime:
    """Set the cluster's zone; the API's time of the change."""
    while True:
        found = await client.get(Cluster, name, NS)
        found.metadata.labels["zone"] = zone
        try:
            updated = await client.update(found)
        except Conflict:  # the scheduler wrote its finalizer meanwhile
            continue
        assert updated.metadata.modified is not None
        return updated.metadata.modified


async def bound(client: ShoalClient, name: str, target: str, limit: float = 30) -> Application:
    start = time.monotonic()
    while True:
        found = await client.get(Application, name, NS)
        where = found.status.scheduled_to
        if where is not None and where.name == target:
            return found
        if time.monotonic() - start > limit:
            raise RuntimeError(f"{name} not bound to {target} after {limit} s")
        await asyncio.sleep(0.01)


async def latency(client: ShoalClient, trials: int) -> list[float]:
    for name in ("la", "lb"):
        await register(client, cluster(name, labels={"zone": "x"}))
    await client.create(app("probe", labels=["zone is x"]))
    current = "la"
    while True:
        probe = await client.get(Application, "probe", NS)
        if probe.status.scheduled_to is not None:
            current = probe.status.scheduled_to.name
            break
        await asyncio.sleep(0.05)
    seconds: list[float] = []
    for _ in range(trials):
        other = "lb" if current == "la" else "la"
        await relabel(client, other, "x")  # it may host the probe again (stays put: sticky)
        changed = await relabel(client, current, "y")
        moved = await bound(client, "probe", other)
        assert moved.status.scheduled is not None
        seconds.append((moved.status.scheduled - changed).total_seconds())
        current = other
    return seconds


async def bulk(client: ShoalClient, m: int, pids: dict[str, int]) -> dict[str, Any]:
    await register(client, cluster("a", labels={"zone": "x", "bulk": "yes"}))
    slots = asyncio.Semaphore(64)

    async def create(i: int) -> None:
        async with slots:
            await client.create(app(f"a{i:05d}", labels=["zone is x", "bulk is yes"]))

    t0 = time.monotonic()
    await asyncio.gather(*(create(i) for i in range(m)))
    print(f"  created in {time.monotonic() - t0:.1f} s", flush=True)
    while (await placed(client))[0].get("a", 0) < m:
        if time.monotonic() - t0 > 600:
            raise RuntimeError("applications not placed on a")
        await asyncio.sleep(0.5)
    print(f"  {m} applications on a", flush=True)
    await register(client, cluster("b", labels={"zone": "x", "bulk": "yes"}))
    await asyncio.sleep(1.0)  # b is known to the scheduler; nobody moves (sticky)
    before = {k: cpu_seconds(pid) for k, pid in pids.items()}
    changed = await relabel(client, "a", "y")
    t0 = time.monotonic()
    while True:
        where, apps = await placed(client)
        if where.get("b", 0) == m:
            break
        if time.monotonic() - t0 > 300:
            raise RuntimeError(f"still {dict(where)} after 300 s")
        await asyncio.sleep(1.0)  # read on the API's clock: polling less often loses nothing
    moved = sorted(
        (datetime.fromisoformat(a["status"]["scheduled"]) - changed).total_seconds() for a in apps
    )
    cpu = {k: round(cpu_seconds(pid) - before[k], 1) for k, pid in pids.items()}
    return {
        "applications": m,
        "first_moved_s": round(moved[0], 2),
        "half_moved_s": round(moved[len(moved) // 2], 2),
        "all_moved_s": round(moved[-1], 2),
        **{f"{k}_cpu_s": v for k, v in cpu.items()},
    }


async def run(trials: int, m: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{Path(tmp) / 'shoal.db'}", secured=False)
        procs = {"api": api.proc}
        try:
            await api.wait_ready()
            config = Path(tmp) / "scheduler.json"
            config.write_text(json.dumps(CONFIG))
            procs["scheduler"] = controller("scheduler", api.url, "--config", str(config))
            async with ShoalClient(api.url, max_connections=80) as client:
                seconds = sorted(await latency(client, trials))
                p99 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))]
                result: dict[str, Any] = {
                    "trials": len(seconds),
                    "p50_s": round(statistics.median(seconds), 3),
                    "p99_s": round(p99, 3),
                    "max_s": round(seconds[-1], 3),
                }
                print("relabel → bound elsewhere: " + json.dumps(result), flush=True)
                if m:
                    pids = {k: p.pid for k, p in procs.items()} | {"bench": os.getpid()}
                    result = await bulk(client, m, pids)
                    print("relabel → all moved: " + json.dumps(result), flush=True)
            print(
                f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, SQLite store; "
                "API and scheduler in 2 processes, reschedule_after 600 s"
            )
        finally:
            for proc in reversed(procs.values()):
                stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100, help="relabel trials (latency)")
    parser.add_argument("--apps", type=int, default=10_000, help="applications moved at once")
    args = parser.parse_args()
    asyncio.run(run(args.trials, args.apps))


if __name__ == "__main__":
    main()
