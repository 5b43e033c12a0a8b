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
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from shoal.client.rest import Conflict, ShoalClient, Unreachable  # noqa: E402
from shoal.model.base import Metadata  # noqa: E402
from shoal.model.core import (  # noqa: E402
    GlobalMetric,
    GlobalMetricsProvider,
    MetricProviderRef,
    MetricSpec,
    MetricsProviderSpec,
    StaticSpec,
)
from shoal.model.kubernetes import (  # noqa: E402
    Application,
    ApplicationSpec,
    Cluster,
    ClusterSpec,
    ClusterState,
    MetricRef,
)
from shoal.model.scheduling import RescheduleTask, RescheduleTaskSpec, TaskPhase  # noqa: E402

NS = "default"
CONFIG = {"stickiness": 1.0, "reschedule_after": 600, "metrics_refresh": 1.0}


# the processes ------------------------------------------------------------------


async def _role_api(path: str, port: int) -> None:
    import uvicorn

    from shoal.api.app import create_app
    from shoal.store.sqlite import SqliteStore

    config = uvicorn.Config(
        create_app(SqliteStore(path)),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    await uvicorn.Server(config).serve()


async def _role_scheduler(url: str) -> None:
    from shoal.scheduler.config import SchedulerConfig
    from shoal.scheduler.scheduler import Scheduler

    async with ShoalClient(url) as client:
        await Scheduler(client, SchedulerConfig.model_validate(CONFIG)).run()


async def _role_controller(url: str) -> None:
    from shoal.controllers.reschedule import RescheduleTaskController

    async with ShoalClient(url) as client:
        await RescheduleTaskController(client).run()


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--role", *args], cwd=str(ROOT))


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# the run ------------------------------------------------------------------------


async def wait_healthy(url: str) -> None:
    deadline = time.monotonic() + 30
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if (await http.get(url + "/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError("API did not come up")


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


async def set_state(client: ShoalClient, name: str, state: ClusterState) -> None:
    cluster = await client.get(Cluster, name, NS)
    cluster.status.state = state
    await client.update_status(cluster)


async def run(m: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        procs = [spawn("api", str(Path(tmp) / "shoal.db"), str(port))]
        try:
            await wait_healthy(url)
            async with ShoalClient(url, max_connections=concurrency + 8) as client:
                values = {"a": 0.6, "b": 0.4}
                await client.create(
                    GlobalMetricsProvider(
                        metadata=Metadata(name="st"),
                        spec=MetricsProviderSpec(type="static", static=StaticSpec(metrics=values)),
                    )
                )
                for name in values:
                    await client.create(
                        GlobalMetric(
                            metadata=Metadata(name=f"m-{name}"),
                            spec=MetricSpec(
                                min=0, max=1, provider=MetricProviderRef(name="st", metric=name)
                            ),
                        )
                    )
                    await client.create(
                        Cluster(
                            metadata=Metadata(name=name, namespace=NS),
                            spec=ClusterSpec(metrics=[MetricRef(name=f"m-{name}", weight=1)]),
                        )
                    )
                procs.append(spawn("scheduler", url))
                procs.append(spawn("controller", url))
                print(f"{m} applications, clusters a (0.6) and b (0.4), stickiness 1.0")
                todo = iter(range(m))

                async def creator() -> None:
                    for i in todo:
                        obj = Application(
                            metadata=Metadata(name=f"a{i:05d}", namespace=NS),
                            spec=ApplicationSpec(),
                        )
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
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role, *rest = args.role
        with contextlib.suppress(KeyboardInterrupt):
            if role == "api":
                asyncio.run(_role_api(rest[0], int(rest[1])))
            elif role == "scheduler":
                asyncio.run(_role_scheduler(rest[0]))
            else:
                asyncio.run(_role_controller(rest[0]))
        return
    asyncio.run(run(args.apps, args.concurrency))


if __name__ == "__main__":
    main()
