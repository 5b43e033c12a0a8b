"""RescheduleTask over many applications: seconds from the task's creation to its finish.

The seed-002 story at scale. The API (SQLite WAL file in a temp dir), the
scheduler and the task controller run in processes of their own. Clusters
``a`` (score 0.6) and ``b`` (0.4) with stickiness 1.0: M applications land on
``a``, ``a`` goes OFFLINE so they fail over to ``b``, ``a`` comes back and
stickiness keeps them on ``b``; then one RescheduleTask with
``target_clusters: [b]`` moves them all back. Printed: time to finish (by
the API's clock: ``finish_time - created``, and wall time until this process
saw the task finished), and where the applications are afterwards.

    .venv/bin/python bench/reschedule.py [--apps 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shoal.client.rest import Conflict, ShoalClient, Unreachable  # noqa: E402
from shoal.model.base import Metadata  # noqa: E402
from shoal.model.kubernetes import Application, ClusterState  # noqa: E402
from shoal.model.scheduling import RescheduleTask, RescheduleTaskSpec, TaskPhase  # noqa: E402
from shoal.testing.fleet import app, scored_clusters, set_state  # noqa: E402
from shoal.testing.launch import ApiProcess, controller, stop  # noqa: E402

NS = "default"
CONFIG = {"stickiness": 1.0, "reschedule_after": 600, "metrics_refresh": 1.0}


async def placement(client: ShoalClient) -> Counter[str]:
    apps = (await client.list(Application, NS, page_size=5000)).items
    return Counter(a.status.scheduled_to.name if a.status.scheduled_to else "-" for a in apps)


async def until(client: ShoalClient, what: str, wanted: dict[str, int], limit: float) -> float:
    start = time.monotonic()
    while True:
        seen = await placement(client)
        if all(seen.get(k, 0) == v for k, v in wanted.items()):
            took = time.monotonic() - start
            print(f"  {what}: {dict(seen)} after {took:.1f} s", flush=True)
            return took
        if time.monotonic() - start > limit:
            raise RuntimeError(f"{what}: still {dict(seen)} after {limit} s")
        await asyncio.sleep(0.5)


async def run(m: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        api = ApiProcess(f"sqlite://{Path(tmp) / 'shoal.db'}")
        url = api.url
        procs = [api.proc]
        try:
            await api.wait_ready()
            async with ShoalClient(url, max_connections=concurrency + 8) as client:
                await scored_clusters(client, {"a": 0.6, "b": 0.4})
                config = Path(tmp) / "scheduler.json"
                config.write_text(json.dumps(CONFIG))
                procs.append(controller("scheduler", url, "--config", str(config)))
                procs.append(controller("reschedule-controller", url))
                print(f"{m} applications, clusters a (0.6) and b (0.4), stickiness 1.0")
                todo = iter(range(m))

                async def creator() -> None:
                    for i in todo:
                        obj = app(f"a{i:05d}")
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
                await until(client, "placed", {"a": m}, 300)
                await set_state(client, "a", ClusterState.OFFLINE)
                await until(client, "a OFFLINE, failed over", {"b": m}, 300)
                await set_state(client, "a", ClusterState.ONLINE)
                await asyncio.sleep(2.0)
                await until(client, "a ONLINE again, sticky", {"b": m}, 10)

                task = RescheduleTask(
                    metadata=Metadata(name="back-to-a"),
                    spec=RescheduleTaskSpec(target_clusters=["b"]),
                )
                t0 = time.monotonic()
                created = await client.create(task)
                shown = -1.0
                print(f"  {'t (s)':>6} {'phase':>9} {'done':>7} {'pending':>7}")
                while True:
                    current = await client.get(RescheduleTask, "back-to-a")
                    status = current.status
                    if time.monotonic() - t0 >= shown + 0.5 or status.phase is TaskPhase.Finished:
                        shown = time.monotonic() - t0
                        done = status.successful + status.failed
                        print(
                            f"  {shown:6.2f} {status.phase.value:>9} {done:7d} {status.pending:7d}",
                            flush=True,
                        )
                    if status.phase is TaskPhase.Finished:
                        break
                    await asyncio.sleep(0.25)
                wall = time.monotonic() - t0
                status = current.status
                assert created.metadata.created is not None and status.finish_time is not None
                api_time = (status.finish_time - created.metadata.created).total_seconds()
                after = await placement(client)
                print(
                    f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
                    "SQLite store; API, scheduler and task controller in 3 processes"
                )
                print(
                    json.dumps(
                        {
                            "applications": m,
                            "targets": status.total,
                            "successful": status.successful,
                            "failed": status.failed,
                            "task_seconds_api_clock": round(api_time, 2),
                            "task_seconds_wall": round(wall, 2),
                            "placement_after": dict(after),
                        }
                    )
                )
        finally:
            for proc in reversed(procs):
                stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64, help="creates in flight")
    args = parser.parse_args()
    asyncio.run(run(args.apps, args.concurrency))


if __name__ == "__main__":
    main()
