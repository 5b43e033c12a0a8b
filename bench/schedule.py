"""Scheduling throughput and latency: applications bound per second, p50/p99 create → bound.

For each fleet size N, a fresh API (SQLite WAL file in a temp dir) and a
scheduler run in processes of their own; one static provider holds 3N metric
values (3 distinct random metrics per cluster), so the metric cache fetches
them all in one call per refresh. M applications are created at once; a watch
on applications records when each binding event arrives. Latency is the
server's ``metadata.created`` to the arrival of the binding event.

With ``--events both`` (the default) each fleet size runs twice, with the
scheduler's events off and on, side by side: placement rate, latency, the CPU
seconds of the API and scheduler processes (read after the recorder's last
flush), and the events written (one ``Scheduled`` per application, batched
through ``POST /core/events``). ``--repeat K`` runs each mode K times,
alternating, and compares the medians: the summary line gives the cost in
throughput, in CPU, and in CPU microseconds per event of each process, and
the CPU the API's event loop spent in ``POST /core/events`` itself (its
``shoal_events_store_cpu_seconds_total``: the direct cost, which another
run's noise does not blur).

    .venv/bin/python bench/schedule.py [--clusters 10,100,1000] [--apps 5000]
        [--events both] [--repeat 3] [--batch 1]

The last two columns say what bounds the rate on a machine the run has to
itself: the load generator's own CPU per application, and the machine's
cores divided by the CPU per application of the API, the scheduler and the
load generator together.

``--batch B`` creates the applications B to a request (``POST
/kubernetes/applications``, as ``shoal create -f`` sends a file of them)
instead of one request each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import orjson  # noqa: E402

from shoal.client.rest import Conflict, ShoalClient, Unreachable  # noqa: E402
from shoal.model.base import Metadata  # noqa: E402
from shoal.model.kubernetes import Application, ApplicationSpec  # noqa: E402
from shoal.testing.builders import (  # noqa: E402
    cluster,
    deployment,
    manifest,
    metric,
    provider,
    register,
)
from shoal.testing.launch import ApiProcess, controller, stop  # noqa: E402

NS = "default"


async def synced(client: ShoalClient) -> None:
    """Until the scheduler is synced: one probe application gets bound."""
    spec = ApplicationSpec(manifest=manifest("probe"))
    probe = Application(metadata=Metadata(name="probe", namespace=NS), spec=spec)
    await client.create(probe)
    while (await client.get(Application, "probe", NS)).status.scheduled_to is None:
        await asyncio.sleep(0.05)


async def bounded(n: int, concurrency: int, op: object) -> None:
    todo = iter(range(n))

    async def worker() -> None:
        for i in todo:
            await op(i)  # type: ignore[operator]

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def fleet(client: ShoalClient, n: int, rng: random.Random) -> None:
    values = {f"m{i}-{k}": rng.random() for i in range(n) for k in range(3)}
    await client.create(provider("static", values))

    async def create_metric(i: int) -> None:
        await client.create(metric(f"m{i // 3}-{i % 3}"))

    async def create_cluster(i: int) -> None:
        labels = {"zone": f"z{i % 4}"}
        weights = {f"m{i}-{k}": float(k + 1) for k in range(3)}
        await register(client, cluster(f"c{i:04d}", labels=labels, metrics=weights))

    await bounded(3 * n, 32, create_metric)
    await bounded(n, 32, create_cluster)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_profiles(
    procs: dict[str, int], wanted: str, label: str
) -> list[subprocess.Popen[bytes]]:
    """``py-spy record`` (raw folded stacks) on each component named in ``wanted``.

    Each goes to ``/tmp/<label>-<component>.txt``: ``pip install py-spy``.
    """
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out = []
    for name in filter(None, wanted.split(",")):
        if name not in procs:
            raise SystemExit(f"--py-spy: no component {name!r} (have {', '.join(procs)})")
        path = f"/tmp/{label}-{name}.txt"
        print(f"py-spy on {name} (pid {procs[name]}) → {path}", flush=True)
        argv = [spy, "record", "-p", str(procs[name]), "-f", "raw", "-r", "200", "-o", path]
        out.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return out


def stop_profiles(profilers: list[subprocess.Popen[bytes]]) -> None:
    """SIGINT makes py-spy write what it sampled."""
    for proc in profilers:
        proc.send_signal(signal.SIGINT)
    for proc in profilers:
        proc.wait(30)


async def count_events(client: ShoalClient) -> int:
    total, params = 0, {"limit": 1000}
    while True:
        data = await client.request("GET", "/core/events", params=params)
        total += sum(int(item["count"]) for item in data["items"])
        if not data["metadata"].get("continue"):
            return total
        params["continue"] = data["metadata"]["continue"]


async def counter(url: str, name: str) -> float:
    """A counter's value on the API's ``/metrics`` (0 when it is not there)."""
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as response:
        text = await response.text()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def run_one(
    n: int, m: int, concurrency: int, workers: int, seed: int, events: bool = True,
    spread: int = 0, py_spy: str = "", batch: int = 1,
) -> dict[str, float]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{Path(tmp) / 'shoal.db'}", cpu=0, secured=False)
        url = api.url
        sched: subprocess.Popen[bytes] | None = None
        try:
            await api.wait_ready()
            async with ShoalClient(url, max_connections=concurrency + 8) as client:
                await fleet(client, n, rng)
                config = Path(tmp) / "scheduler.json"
                flag = "true" if events else "false"
                config.write_text(
                    f'{{"workers": {workers}, "reschedule_after": 600, "events": {flag}}}'
                )
                sched = controller("scheduler", url, "--config", str(config), cpu=1)
                await synced(client)
                cpu0 = cpu_seconds(api.proc.pid), cpu_seconds(sched.pid), cpu_seconds(os.getpid())

                start_rev = (await client.list(Application, NS)).revision
                bound_at: dict[str, float] = {}
                created: dict[str, float] = {}
                done = asyncio.Event()

                async def watch() -> None:
                    # A lean load generator: raw ndjson, no models (it shares the 2 cores).
                    path = f"/kubernetes/namespaces/{NS}/applications"
                    params = {"watch": "", "resource_version": str(start_rev)}
                    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
                    async with (
                        aiohttp.ClientSession(timeout=timeout) as http,
                        http.get(url + path, params=params) as response,
                    ):
                        buffer = b""
                        async for chunk in response.content.iter_any():
                            buffer += chunk
                            *lines, buffer = buffer.split(b"\n")
                            for line in lines:
                                if not line:
                                    continue
                                obj = orjson.loads(line)["object"]
                                name = obj["metadata"]["name"]
                                if name == "probe":
                                    continue
                                if name not in created:
                                    stamp = obj["metadata"]["created"].replace("Z", "+00:00")
                                    created[name] = datetime.fromisoformat(stamp).timestamp()
                                if obj["status"].get("scheduled_to") and name not in bound_at:
                                    bound_at[name] = time.time()
                                    if len(bound_at) == m:
                                        done.set()
                                        return

                watcher = asyncio.create_task(watch())
                await asyncio.sleep(0.2)

                failures: list[str] = []

                def body(i: int) -> dict[str, object]:
                    name = f"a{i:05d}"
                    spec: dict[str, object] = {"manifest": manifest(name)}
                    if spread:  # on several clusters, its replicas divided among them
                        spec["manifest"] = [deployment(name, replicas=2 * spread)]
                        spec["placement"] = {"clusters": spread, "replicas": "divided"}
                    return {
                        "api": "kubernetes",
                        "kind": "Application",
                        "metadata": {"name": name, "namespace": NS},
                        "spec": spec,
                    }

                async def post(path: str, data: dict[str, object]) -> None:
                    for _ in range(5):  # an overloaded API may time a create out: try again
                        try:
                            answer = await client.request("POST", path, body=data)
                        except Conflict:
                            return  # the timed-out attempt went through after all
                        except Unreachable as error:
                            failures.append(str(error))
                            continue
                        if answer and "results" in answer:  # a batch: each item on its own
                            results = answer["results"]
                            refused = [r for r in results if r["status"] not in (200, 409)]
                            if refused:
                                raise RuntimeError(f"refused: {refused[:3]}")
                        return
                    raise RuntimeError(f"could not post to {path}")

                async def create(i: int) -> None:
                    if batch == 1:
                        await post(f"/kubernetes/namespaces/{NS}/applications", body(i))
                    else:  # the i-th batch of applications, one request
                        items = [body(j) for j in range(i * batch, min(m, (i + 1) * batch))]
                        await post("/kubernetes/applications", {"items": items})

                procs = {"api": api.proc.pid, "scheduler": sched.pid}
                profilers = start_profiles(procs, py_spy, f"schedule-{n}")
                t0 = time.time()
                requests = m if batch == 1 else -(-m // batch)
                in_flight = concurrency if batch == 1 else max(2, concurrency // batch)
                creating = asyncio.create_task(bounded(requests, in_flight, create))
                last = 0
                print(f"\nN={n} clusters, M={m} applications")
                print(f"{'t (s)':>6} {'bound':>7} {'bound/s':>8}")
                while not done.is_set() and not (creating.done() and creating.exception()):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(done.wait(), 1.0)
                    now = len(bound_at)
                    print(f"{time.time() - t0:6.1f} {now:7d} {now - last:8d}", flush=True)
                    last = now
                    if time.time() - t0 > 600:
                        print("gave up after 600 s")
                        break
                await creating
                if failures:
                    print(f"{len(failures)} creates timed out and were retried")
                t_created = max(created.values()) - t0 if created else float("nan")
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher
                t1 = max(bound_at.values())
                own_cpu = cpu_seconds(os.getpid()) - cpu0[2]  # the load generator's
                stop_profiles(profilers)
                # The recorder's last flush (every second) is part of the burst's cost:
                # both modes' CPU is read after it (the quiet seconds cost both the same).
                await asyncio.sleep(2.5)
                cpu1 = cpu_seconds(api.proc.pid), cpu_seconds(sched.pid)
                store_cpu = await counter(url, "shoal_events_store_cpu_seconds_total")
                written = await count_events(client)
                lat = sorted(bound_at[k] - created[k] for k in bound_at if k in created)
                return {
                    "N": n,
                    "M": len(bound_at),
                    "seconds": t1 - t0,
                    "create_s": t_created,
                    "rate": len(bound_at) / (t1 - t0),
                    "p50": lat[len(lat) // 2],
                    "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                    "api_cpu": cpu1[0] - cpu0[0],
                    "sched_cpu": cpu1[1] - cpu0[1],
                    "bench_cpu": own_cpu,
                    "events": written,
                    "store_cpu": store_cpu,
                    "on": float(events),
                }
        finally:
            if sched is not None:
                stop(sched)
            api.stop()


def median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def summary(n: int, offs: list[dict[str, float]], ons: list[dict[str, float]]) -> str:
    """Events' cost from the medians of the runs: throughput, CPU, and CPU per event."""
    rate_off, rate_on = median(offs, "rate"), median(ons, "rate")
    api_off, api_on = median(offs, "api_cpu"), median(ons, "api_cpu")
    sched_off, sched_on = median(offs, "sched_cpu"), median(ons, "sched_cpu")
    written = median(ons, "events") or 1.0
    return (
        f"N={n}, median of {len(ons)}: events cost {100 * (1 - rate_on / rate_off):+.1f} % of "
        f"placement throughput, {100 * ((api_on + sched_on) / (api_off + sched_off) - 1):+.1f} % "
        f"CPU (API + scheduler: API {100 * (api_on / api_off - 1):+.1f} %, "
        f"{1e6 * (api_on - api_off) / written:.0f} us/event; scheduler "
        f"{100 * (sched_on / sched_off - 1):+.1f} %, {1e6 * (sched_on - sched_off) / written:.0f} "
        f"us/event); the API's thread in POST /core/events "
        f"{1e6 * median(ons, 'store_cpu') / written:.0f} us/event, "
        f"{100 * median(ons, 'store_cpu') / api_off:.1f} % of the API's CPU without events"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", default="10,100,1000")
    parser.add_argument("--apps", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64, help="creates in flight")
    parser.add_argument(
        "--batch", type=int, default=1,
        help="applications per create request (POST /kubernetes/applications); 1: single "
        "creates. Batches in flight: concurrency / batch, at least 2",
    )
    parser.add_argument("--workers", type=int, default=256, help="scheduler workers")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--spread", type=int, default=0,
        help="place each application on this many clusters (spec.placement, divided)",
    )
    parser.add_argument(
        "--py-spy", default="", help="processes to profile during the burst: api,scheduler"
    )
    parser.add_argument(
        "--events", choices=("both", "on", "off"), default="both", help="scheduler's events"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each mode (alternating; medians compared)"
    )
    args = parser.parse_args()
    modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.events]
    load0 = os.getloadavg()
    rows = []
    for n in (int(x) for x in args.clusters.split(",")):
        for k in range(args.repeat):
            # off, on, on, off, ...: a drift of the machine's load weighs on both modes alike
            for events in modes if k % 2 == 0 else modes[::-1]:
                run = run_one(
                    n, args.apps, args.concurrency, args.workers, args.seed, events, args.spread,
                    args.py_spy, args.batch,
                )
                rows.append(asyncio.run(run))
    load = " / ".join(f"{a:.2f}" for a in os.getloadavg())
    how = "single creates" if args.batch == 1 else f"creates in batches of {args.batch}"
    print(f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, SQLite store, {how}")
    print(f"load average at start {load0[0]:.2f}, at end (1/5/15 min) {load}")
    head = f"{'clusters':>8} {'events':>6} {'apps':>6} {'all bound (s)':>13} {'created (s)':>11} "
    print(
        head + f"{'apps/s':>8} {'p50 (s)':>8} {'p99 (s)':>8} {'API cpu':>8} {'sched cpu':>9} "
        f"{'written':>8} {'API us/app':>10} {'sched us/app':>12} {'bench us/app':>12} "
        f"{'at most/s':>9}"
    )
    for r in rows:
        # every process of the run shares the machine's cores: their CPU per application
        # bounds the rate, whatever each process's own speed
        total = (r["api_cpu"] + r["sched_cpu"] + r["bench_cpu"]) / r["M"]
        print(
            f"{r['N']:8.0f} {'on' if r['on'] else 'off':>6} {r['M']:6.0f} {r['seconds']:13.2f} "
            f"{r['create_s']:11.2f} {r['rate']:8.0f} {r['p50']:8.3f} {r['p99']:8.3f} "
            f"{r['api_cpu']:8.2f} {r['sched_cpu']:9.2f} {r['events']:8.0f} "
            f"{1e6 * r['api_cpu'] / r['M']:10.0f} {1e6 * r['sched_cpu'] / r['M']:12.0f} "
            f"{1e6 * r['bench_cpu'] / r['M']:12.0f} {(os.cpu_count() or 1) / total:9.0f}"
        )
    print(
        "bench us/app: the load generator's own CPU (its clients and its watch). at most/s: "
        "the cores divided by the CPU per application of the API, the scheduler and the bench"
    )
    if len(modes) == 2:
        for n in dict.fromkeys(int(r["N"]) for r in rows):
            offs = [r for r in rows if r["N"] == n and not r["on"]]
            ons = [r for r in rows if r["N"] == n and r["on"]]
            print(summary(n, offs, ons))


if __name__ == "__main__":
    main()
