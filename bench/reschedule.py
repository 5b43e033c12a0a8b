"""RescheduleTask over many applications against the bare failover of the same applications.

Rescheduling on demand at scale. The API (SQLite WAL file in a temp dir), the
scheduler and the task controller run in processes of their own. Clusters
``a`` (score 0.6) and ``b`` (0.4) with stickiness 1.0: M applications land on
``a``. Each round then times, back to back on the same machine:

- **failover**: ``a`` goes OFFLINE and every application moves to ``b``
  (``a`` comes back and stickiness keeps them there);
- **task**: one RescheduleTask with ``target_clusters: [b]`` moves them all
  back to ``a``.

Both are read on the API's clock: failover from the OFFLINE write to the last
application's ``status.last_scheduled``; the task from its ``metadata.created``
to its ``finish_time`` (and to the last binding: the placement inside it). The
ratio task / failover is the figure that matters on a shared machine, with the
CPU seconds each process spent in each phase (steadier than wall time there).
``--profile DIR`` records py-spy profiles (collapsed stacks) of the three processes during
each phase of the first round.

    .venv/bin/python bench/reschedule.py [--apps 10000] [--rounds 3] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.schedule import cpu_seconds  # noqa: E402
from shoal.client.rest import (  # noqa: E402
    Conflict,
    ShoalClient,
    Unreachable,
    collection_path,
    item_path,
)
from shoal.model.base import Metadata  # noqa: E402
from shoal.model.kubernetes import Application, ClusterState  # noqa: E402
from shoal.model.scheduling import RescheduleTask, RescheduleTaskSpec, TaskPhase  # noqa: E402
from shoal.testing.builders import app, scored_clusters, set_state  # noqa: E402
from shoal.testing.launch import ApiProcess, controller, stop  # noqa: E402

NS = "default"
Obj = dict[str, Any]
MANIFEST = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}]
CONFIG = {"stickiness": 1.0, "reschedule_after": 600, "metrics_refresh": 1.0}


async def applications(client: ShoalClient) -> list[Obj]:
    """Every application as JSON: this bench's polls stay light beside what they time."""
    apps: list[Obj] = []
    params: dict[str, Any] = {"limit": 5000}
    while True:
        data = await client.request("GET", collection_path(Application, NS), params=params)
        apps.extend(data["items"])
        params["continue"] = data["metadata"].get("continue")
        if not params["continue"]:
            return apps


def placement(apps: list[Obj]) -> Counter[str]:
    return Counter((a["status"].get("scheduled_to") or {}).get("name", "-") for a in apps)


async def until(client: ShoalClient, what: str, cluster: str, m: int, limit: float) -> datetime:
    """Until all ``m`` applications are on ``cluster``; the latest ``last_scheduled``."""
    start = time.monotonic()
    while True:
        apps = await applications(client)
        seen = placement(apps)
        if seen.get(cluster, 0) == m:
            print(f"  {what}: {dict(seen)} (seen after {time.monotonic() - start:.1f} s)")
            return max(_time(a["status"].get("last_scheduled")) for a in apps)
        if time.monotonic() - start > limit:
            raise RuntimeError(f"{what}: still {dict(seen)} after {limit} s")
        await asyncio.sleep(0.5)


def _cpu(spent: dict[str, float], names: list[str]) -> str:
    """CPU seconds per process, then their total."""
    each = " ".join(f"{spent[name]:.1f}" for name in names)
    return f"{each} = {sum(spent.values()):.1f}"


def _time(text: str | None) -> datetime:
    return datetime.fromisoformat(text) if text else datetime.min.replace(tzinfo=UTC)


class Profiler:
    """py-spy profiles (collapsed stacks) of some processes over one phase, into ``out``."""

    def __init__(self, out: Path | None, pids: dict[str, int]) -> None:
        self.out, self.pids = out, pids
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, phase: str) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if self.out is None or not Path(spy).exists():
            return
        self.out.mkdir(parents=True, exist_ok=True)
        for name, pid in self.pids.items():
            target = self.out / f"{phase}-{name}.txt"
            self.procs.append(
                subprocess.Popen(
                    [
                        spy,
                        "record",
                        "-p",
                        str(pid),
                        "-r",
                        "50",
                        "-f",
                        "raw",
                        "-o",
                        str(target),
                        "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            proc.wait(30)
        self.procs.clear()


async def failover(client: ShoalClient, m: int) -> float:
    t0 = datetime.now(UTC)
    await set_state(client, "a", ClusterState.OFFLINE)
    last = await until(client, "a OFFLINE, failed over", "b", m, 300)
    await set_state(client, "a", ClusterState.ONLINE)
    await asyncio.sleep(2.0)
    await until(client, "a ONLINE again, sticky", "b", m, 10)
    return (last - t0).total_seconds()


async def task(client: ShoalClient, m: int, name: str) -> tuple[float, float, dict[str, int]]:
    created = await client.create(
        RescheduleTask(metadata=Metadata(name=name), spec=RescheduleTaskSpec(target_clusters=["b"]))
    )
    t0 = time.monotonic()
    shown = -1.0
    print(f"  {'t (s)':>6} {'phase':>9} {'done':>7} {'pending':>7}")
    path = item_path(RescheduleTask, name)
    while True:
        status = (await client.request("GET", path))["status"]
        finished = status["phase"] == TaskPhase.Finished.value
        if time.monotonic() - t0 >= shown + 0.5 or finished:
            shown = time.monotonic() - t0
            done = status["successful"] + status["failed"]
            print(f"  {shown:6.2f} {status['phase']:>9} {done:7d} {status['pending']:7d}")
        if finished:
            break
        await asyncio.sleep(0.5)  # as the failover polls; each read is every target
    assert created.metadata.created is not None
    last = await until(client, "task finished", "a", m, 10)
    counts = {key: status[key] for key in ("total", "successful", "failed")}
    return (
        (_time(status["finish_time"]) - created.metadata.created).total_seconds(),
        (last - created.metadata.created).total_seconds(),
        counts,
    )


async def create_all(client: ShoalClient, m: int, concurrency: int) -> None:
    todo = iter(range(m))

    async def creator() -> None:
        for i in todo:
            obj = app(f"a{i:05d}")
            obj.spec.manifest = MANIFEST  # never applied: no kube controller runs here
            for _ in range(5):
                try:
                    await client.create(obj)
                    break
                except Conflict:
                    break
                except Unreachable:
                    continue

    t0 = time.monotonic()
    await asyncio.gather(*(creator() for _ in range(concurrency)))
    print(f"  created in {time.monotonic() - t0:.1f} s", flush=True)


async def run(m: int, rounds: int, concurrency: int, profile: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{Path(tmp) / 'shoal.db'}", secured=False)
        url = api.url
        procs = {"api": api.proc}
        try:
            await api.wait_ready()
            async with ShoalClient(url, max_connections=concurrency + 8) as client:
                await scored_clusters(client, {"a": 0.6, "b": 0.4})
                config = Path(tmp) / "scheduler.json"
                config.write_text(json.dumps(CONFIG))
                procs["scheduler"] = controller("scheduler", url, "--config", str(config))
                procs["reschedule"] = controller("reschedule-controller", url)
                print(f"{m} applications, clusters a (0.6) and b (0.4), stickiness 1.0")
                await create_all(client, m, concurrency)
                await until(client, "placed", "a", m, 300)
                rows: list[dict[str, Any]] = []
                pids = {k: p.pid for k, p in procs.items()}
                spy = Profiler(profile, pids)

                def cpu() -> dict[str, float]:
                    return {k: cpu_seconds(pid) for k, pid in pids.items()}

                def spent(before: dict[str, float]) -> dict[str, float]:
                    return {k: round(v - before[k], 1) for k, v in cpu().items()}

                for n in range(rounds):
                    print(f"round {n + 1}")
                    if n == 0:
                        spy.start("failover")
                    before = cpu()
                    bare = await failover(client, m)
                    bare_cpu = spent(before)
                    spy.stop()
                    if n == 0:
                        spy.start("task")
                    before = cpu()
                    finished, placed, counts = await task(client, m, f"back-to-a-{n}")
                    task_cpu = spent(before)
                    spy.stop()
                    rows.append({
                        "failover_s": round(bare, 2), "task_s": round(finished, 2),
                        "task_placed_s": round(placed, 2), "ratio": round(finished / bare, 2),
                        "failover_cpu_s": bare_cpu, "task_cpu_s": task_cpu,
                        "cpu_ratio": round(sum(task_cpu.values()) / sum(bare_cpu.values()), 2),
                        **counts,
                    })  # fmt: skip
                    print("  " + json.dumps(rows[-1]), flush=True)
                print(
                    f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
                    "SQLite store; API, scheduler and task controller in 3 processes"
                )
                names = list(pids)
                print(
                    f"{'round':>5} {'failover s':>10} {'task s':>7} {'placed s':>8} {'ratio':>6}"
                    f"  {'failover cpu s (' + ' '.join(names) + ')':>34}"
                    f"  {'task cpu s (' + ' '.join(names) + ')':>30} {'cpu ratio':>9}"
                )
                for n, row in enumerate(rows, 1):
                    bare_cpu, task_cpu = row["failover_cpu_s"], row["task_cpu_s"]
                    print(
                        f"{n:5d} {row['failover_s']:10.2f} {row['task_s']:7.2f} "
                        f"{row['task_placed_s']:8.2f} {row['ratio']:6.2f}  "
                        f"{_cpu(bare_cpu, names):>34}  {_cpu(task_cpu, names):>30} "
                        f"{row['cpu_ratio']:9.2f}"
                    )
                median = statistics.median(r["ratio"] for r in rows)
                cpu_median = statistics.median(r["cpu_ratio"] for r in rows)
                print(
                    json.dumps(
                        {
                            "applications": m,
                            "rounds": len(rows),
                            "median_ratio": median,
                            "median_cpu_ratio": cpu_median,
                        }
                    )
                )
        finally:
            for proc in reversed(procs.values()):
                stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="failover + task rounds")
    parser.add_argument("--concurrency", type=int, default=64, help="creates in flight")
    parser.add_argument("--profile", type=Path, help="write py-spy profiles here")
    args = parser.parse_args()
    asyncio.run(run(args.apps, args.rounds, args.concurrency, args.profile))


if __name__ == "__main__":
    main()
