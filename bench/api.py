"""API server throughput and latency: creates/s, reads/s, list latency, watch fan-out, RSS.

The API runs in its own process (uvicorn over ``create_app``), the load
generator (aiohttp) in this one, so they do not share a core.
The last row is the floor: the CPU per GET of a bare ASGI app on the same
server, loop and collector settings, the part of every request that is not
Shoal's.

    .venv/bin/python bench/api.py [--store sqlite|etcd|etcd://host:port] [--objects 10000]
                                  [--rbac]
    .venv/bin/python bench/api.py --compare-schemas [--objects 3000] [--rounds 4]

``--compare-schemas`` measures only creates of a one-Deployment application,
with manifest schema validation on and off ($SHOAL_MANIFEST_SCHEMAS=off), on a
fresh server each, alternating the order round by round (the machine is
shared and noisy), and prints both side by side with the API's CPU time per
create, the steadier figure.

``--rbac`` turns security on as ``shoal up`` does (static bearer token, RBAC
with a role that grants every right in the bench namespace only, secrets
key; no audit): the difference to a run without it is the cost of
authentication and authorization per request. On a loaded machine that
difference drowns in noise, so the run also times the security middleware
alone and prints its share of one create.

``--store etcd`` starts a one-member etcd of its own (tests/fixtures/etcd.py,
data on tmpfs when /dev/shm exists); ``etcd://...`` uses a running one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from shoal.machinery.ports import free_ports
from shoal.testing.builders import cluster as fleet_cluster
from shoal.testing.builders import deployment

NS = f"bench-{os.getpid()}"  # fresh on a shared etcd too
APPS = f"/kubernetes/namespaces/{NS}/applications"
CLUSTER = {"api": "kubernetes", "kind": "Cluster", "namespace": NS, "name": "c-1"}

SERVER = """
import sys, uvicorn, uvloop
from pathlib import Path
from shoal.api.app import create_app
from shoal.machinery.memory import tune_gc
from shoal.machinery.server import listen
from shoal.store.factory import open_store
store_url, port, secured = sys.argv[1], int(sys.argv[2]), len(sys.argv) > 3
store = open_store(store_url)
protection = None
if secured:
    from shoal.api.auth import Security, protect
    from shoal.api.auth.config import Limits
    from shoal.api.codec import encode
    from shoal.model.base import Metadata
    from shoal.model.core import Role, RoleBinding, RoleRule
    tokens, namespace, key = Path(sys.argv[3]), sys.argv[4], sys.argv[5]
    # The bench user is the only one: it measures capacity, not the per-user share.
    security = Security(allow_anonymous=False, token_file=tokens, authorization="RBAC",
                        secrets_key_file=Path(key), limits=Limits(rate_per_user=1e12, burst=10**12))
    protection = protect(security, store)
    rule = RoleRule(api="", resources=[""], namespaces=[namespace, namespace + "-batch"],
                    verbs=[""])
    grants = [Role(metadata=Metadata(name="bench"), rules=[rule]),
              RoleBinding(metadata=Metadata(name="bench"), users=["bench"], roles=["bench"])]
sock = listen("127.0.0.1", port)
config = uvicorn.Config(create_app(store, security=protection), log_level="warning",
                        access_log=False, lifespan="off")
server = uvicorn.Server(config)

async def main():
    if protection is not None:
        for obj in grants:
            await protection.store.create(obj.store_key(), encode(obj))
        await protection.start()
    await server.serve(sockets=[sock])

tune_gc()  # as `shoal api` (shoal.system.process) does
uvloop.run(main())
"""
TOKEN = "bench-token"


FLOOR_SERVER = r"""
import sys
import uvicorn, uvloop
from shoal.machinery.memory import tune_gc
from shoal.machinery.server import listen

async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"ok":true}'})

sock = listen("127.0.0.1", int(sys.argv[1]))
config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
tune_gc()
uvloop.run(uvicorn.Server(config).serve(sockets=[sock]))
"""
"""A bare ASGI app on the same server, loop and collector settings as the API: the CPU of a
request that Shoal's code adds nothing to (the floor of any request to the API)."""



def application(name: str, namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"bench": "yes",
                                                         "shard": str(hash(name) % 8)}}
    if namespace is not None:  # in a batch, an item names its namespace
        metadata["namespace"] = namespace
    return {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": metadata,
        "spec": {
            "manifest": [deployment(name, image="nginx:1.27")],
            "constraints": {"cluster": {"labels": ["location is DE"], "metrics": ["load < 0.5"]}},
        },
    }


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def p50_p99(seconds: list[float], digits: int = 1) -> str:
    return (
        f"{quantile(seconds, 0.5) * 1e3:.{digits}f} / {quantile(seconds, 0.99) * 1e3:.{digits}f} ms"
    )


async def run_many(
    count: int, parallel: int, one: Callable[[int], Awaitable[None]]
) -> tuple[float, list[float]]:
    """Run ``one(i)`` for every i, ``parallel`` at a time; elapsed seconds and latencies."""
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            start = time.perf_counter()
            await one(i)
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(parallel)))
    return time.perf_counter() - start, latencies


async def wait_ready(http: aiohttp.ClientSession, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"API server exited with {process.returncode}")
        try:
            async with http.get("/readyz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("API server did not become ready")


async def watcher(
    http: aiohttp.ClientSession, path: str, params: dict[str, Any], want: int
) -> float:
    """Read ``want`` events; the time the last one arrived."""
    seen = 0
    async with http.get(path, params=params, timeout=aiohttp.ClientTimeout(total=None)) as r:
        assert r.status == 200, await r.text()
        async for line in r.content:
            if line.strip():
                seen += 1
                if seen >= want:
                    return time.perf_counter()
    raise RuntimeError(f"watch ended after {seen} of {want} events")


async def bench(
    port: int,
    process: subprocess.Popen[bytes],
    objects: int,
    parallel: int,
    watchers: int,
    rbac: bool = False,
) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    connector = aiohttp.TCPConnector(limit=parallel + watchers + 4, keepalive_timeout=2)
    headers = {"content-type": "application/json"}
    if rbac:
        headers["authorization"] = f"Bearer {TOKEN}"
    async with aiohttp.ClientSession(
        f"http://127.0.0.1:{port}",
        connector=connector,
        headers=headers,
    ) as http:
        await wait_ready(http, process)
        rows.append(("server RSS idle", f"{rss_mib(process.pid):.0f} MiB"))
        async with http.get(APPS) as response:
            start_revision = (await response.json())["metadata"]["resource_version"]

        # live watchers see every create while it happens
        live = [
            asyncio.create_task(
                watcher(http, APPS, {"watch": "", "resource_version": start_revision}, objects)
            )
            for _ in range(watchers)
        ]
        await asyncio.sleep(0.3)

        bodies = [orjson.dumps(application(f"app-{i:06d}")) for i in range(objects)]

        async def create(i: int) -> None:
            async with http.post(APPS, data=bodies[i]) as response:
                await response.read()
                if response.status >= 300:
                    raise RuntimeError(f"create: {response.status} {await response.text()}")

        cpu = cpu_seconds(process.pid)
        elapsed, lat = await run_many(objects, parallel, create)
        t0 = time.perf_counter() - elapsed
        rows.append((f"creates ({parallel} in flight)", f"{objects / elapsed:,.0f} /s"))
        rows.append(
            (
                "create latency p50 / p99",
                p50_p99(lat, 1),
            )
        )
        done = await asyncio.gather(*live)
        create_cpu = (cpu_seconds(process.pid) - cpu) / objects
        rows.append(
            (
                f"watch, live: events to {watchers} watchers",
                f"{watchers * objects / (max(done) - t0):,.0f} /s",
            )
        )
        rows.append(
            (f"API CPU per create (and its {watchers} watch events)", f"{create_cpu * 1e3:.3f} ms")
        )

        # the same creates in batches (POST /kubernetes/applications), in a namespace of
        # their own (the lists below stay at `objects`), to as many live watchers
        other = f"{NS}-batch"
        async with http.get(f"/kubernetes/namespaces/{other}/applications") as response:
            other_revision = (await response.json())["metadata"]["resource_version"]
        live = [
            asyncio.create_task(
                watcher(
                    http,
                    f"/kubernetes/namespaces/{other}/applications",
                    {"watch": "", "resource_version": other_revision},
                    objects,
                )
            )
            for _ in range(watchers)
        ]
        await asyncio.sleep(0.3)
        per_batch = 100
        batches = [
            b'{"items":[%s]}'
            % b",".join(
                orjson.dumps(application(f"app-{j:06d}", other))
                for j in range(i, min(objects, i + per_batch))
            )
            for i in range(0, objects, per_batch)
        ]

        async def create_batch(i: int) -> None:
            async with http.post("/kubernetes/applications", data=batches[i]) as response:
                results = (await response.json())["results"]
                assert all(r["status"] == 200 for r in results), results[:3]

        cpu = cpu_seconds(process.pid)
        await run_many(len(batches), 4, create_batch)
        await asyncio.gather(*live)
        batch_create_cpu = (cpu_seconds(process.pid) - cpu) / objects
        rows.append(
            (
                f"API CPU per create in batches of {per_batch} (and its {watchers} watch events)",
                f"{batch_create_cpu * 1e6:.0f} µs",
            )
        )

        reads = objects

        async def read(i: int) -> None:
            async with http.get(f"{APPS}/app-{i % objects:06d}") as response:
                await response.read()
                assert response.status == 200

        cpu = cpu_seconds(process.pid)
        elapsed, lat = await run_many(reads, parallel, read)
        read_cpu = (cpu_seconds(process.pid) - cpu) / reads
        rows.append((f"reads ({parallel} in flight)", f"{reads / elapsed:,.0f} /s"))
        rows.append(("API CPU per read", f"{read_cpu * 1e3:.3f} ms"))
        rows.append(
            (
                "read latency p50 / p99",
                p50_p99(lat, 1),
            )
        )

        # bindings, status patches and watch delivery: the writes placement and
        # running rest on; CPU per operation is the figure to compare
        cluster = fleet_cluster("c-1").model_dump(mode="json")
        cluster["metadata"]["namespace"] = NS
        async with http.post(f"/kubernetes/namespaces/{NS}/clusters", json=cluster) as response:
            assert response.status < 300, await response.text()
        batch = 100

        async def bind(i: int) -> None:
            items = [
                {"namespace": NS, "name": f"app-{j:06d}", "cluster": CLUSTER}
                for j in range(i * batch, min(objects, (i + 1) * batch))
            ]
            async with http.post("/scheduling/bindings", json={"bindings": items}) as response:
                results = (await response.json())["results"]
                assert all(r["status"] == 200 for r in results), results[:3]

        cpu = cpu_seconds(process.pid)
        await run_many(-(-objects // batch), 4, bind)
        bind_cpu = (cpu_seconds(process.pid) - cpu) / objects
        rows.append((f"API CPU per binding (batches of {batch})", f"{bind_cpu * 1e6:.0f} µs"))

        async def patch_statuses(round_: int, delivered: Sequence[Awaitable[Any]] = ()) -> float:
            """API CPU per status patch, counted until ``delivered`` (the watchers) are done."""

            async def patch(i: int) -> None:
                health = {"desired_pods": 2, "running_pods": round_}
                body = {"status": {"container_health": health}}
                async with http.patch(f"{APPS}/app-{i:06d}/status", json=body) as response:
                    await response.read()
                    assert response.status == 200, await response.text()

            cpu = cpu_seconds(process.pid)
            await run_many(objects, parallel, patch)
            await asyncio.gather(*delivered)
            return (cpu_seconds(process.pid) - cpu) / objects

        patch_cpu = await patch_statuses(1)
        rows.append(("API CPU per status patch (no watcher)", f"{patch_cpu * 1e6:.0f} µs"))

        async def patch_in_batches(
            value: int, size: int, parallel: int, delivered: Sequence[Awaitable[Any]] = ()
        ) -> float:
            """API CPU per status written in batches of ``size``, counted until ``delivered``
            (the watchers) end."""

            async def patch(i: int) -> None:
                health = {"desired_pods": 2, "running_pods": value}
                items = [
                    {"namespace": NS, "name": f"app-{j:06d}",
                     "status": {"container_health": health}}
                    for j in range(i * size, min(objects, (i + 1) * size))
                ]  # fmt: skip
                path = "/scheduling/applicationstatuses"
                async with http.post(path, json={"items": items}) as response:
                    results = (await response.json())["results"]
                    assert all(r["status"] == 200 for r in results), results[:3]

            cpu = cpu_seconds(process.pid)
            await run_many(-(-objects // size), parallel, patch)
            await asyncio.gather(*delivered)
            return (cpu_seconds(process.pid) - cpu) / objects

        small = 10  # the kube controller's batches are small while applications trickle in
        batch_cpu = await patch_in_batches(3, small, 8)
        rows.append(
            (f"API CPU per status patch (batches of {small})", f"{batch_cpu * 1e6:.0f} µs")
        )

        # Watch delivery, live: the same batched writes with and without 10 watchers, in
        # alternating rounds. A delivery costs a few µs, within the noise of one write
        # alone, so the writes are the cheapest there are (statuses in batches of 100).
        alone: list[float] = []
        watched: list[float] = []
        for round_ in range(3):
            alone.append(await patch_in_batches(10 + 2 * round_, batch, 4))
            async with http.get(APPS, params={"limit": "1"}) as response:
                now = (await response.json())["metadata"]["resource_version"]
            params = {"watch": "", "resource_version": now}
            watching = [
                asyncio.create_task(watcher(http, APPS, params, objects)) for _ in range(watchers)
            ]
            await asyncio.sleep(0.3)
            watched.append(await patch_in_batches(11 + 2 * round_, batch, 4, watching))
        delivered = (statistics.median(watched) - statistics.median(alone)) / watchers
        rows.append(
            (
                "API CPU per watch event delivered (median of 3 pairs)",
                f"{delivered * 1e6:.1f} µs",
            )
        )

        async def timed_lists(
            times: int, params: dict[str, str] | None = None
        ) -> tuple[list[float], bytes]:
            """Seconds each of ``times`` list requests took, and the last answer."""
            took: list[float] = []
            body = b""
            for _ in range(times):
                start = time.perf_counter()
                async with http.get(APPS, params=params) as response:
                    body = await response.read()
                took.append(time.perf_counter() - start)
            return took, body

        list_times, body = await timed_lists(20)
        size = len(body)
        count = len(orjson.loads(body)["items"])
        rows.append(
            (
                f"list {count:,} objects ({size / 2**20:.1f} MiB) p50 / p99",
                p50_p99(list_times, 0),
            )
        )
        page_times, _ = await timed_lists(50, {"limit": "500"})
        rows.append(
            (
                "list page of 500 p50 / p99",
                p50_p99(page_times, 1),
            )
        )
        sel_times, _ = await timed_lists(20, {"label_selector": "shard=3"})
        rows.append(
            (
                f"list with label_selector at {objects:,} p50",
                f"{statistics.median(sel_times) * 1e3:.0f} ms",
            )
        )

        # replay: watchers resume from before the creates and read the history
        start = time.perf_counter()
        done = await asyncio.gather(
            *(
                watcher(http, APPS, {"watch": "", "resource_version": start_revision}, objects)
                for _ in range(watchers)
            )
        )
        rows.append(
            (
                f"watch, replay: events to {watchers} watchers",
                f"{watchers * objects / (max(done) - start):,.0f} /s",
            )
        )
        rows.append(("server RSS after", f"{rss_mib(process.pid):.0f} MiB"))
    return rows


async def floor_cost(
    port: int, process: subprocess.Popen[bytes], requests: int, parallel: int
) -> float:
    """CPU seconds per GET of ``FLOOR_SERVER`` (running as ``process``), from its own process."""
    connector = aiohttp.TCPConnector(limit=parallel + 4)
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", connector=connector) as http:
        await wait_ready(http, process)

        async def get(i: int) -> None:
            async with http.get("/x") as response:
                await response.read()

        cpu = cpu_seconds(process.pid)
        await run_many(requests, parallel, get)
        return (cpu_seconds(process.pid) - cpu) / requests


async def guard_cost(tokens: Path, key: Path, passes: int = 20_000) -> float:
    """Microseconds the security middleware adds to a create (timed alone, in this process:
    the figure a loaded machine's throughput numbers blur)."""
    from shoal.api.auth import Security, protect
    from shoal.api.auth.config import Limits
    from shoal.api.auth.guard import Guard
    from shoal.api.codec import encode
    from shoal.model.base import Metadata
    from shoal.model.core import Role, RoleBinding, RoleRule
    from shoal.store.factory import open_store

    limits = Limits(rate_per_user=1e12, burst=10**12)
    security = Security(allow_anonymous=False, token_file=tokens, authorization="RBAC",
                        secrets_key_file=key, limits=limits)  # fmt: skip
    protection = protect(security, open_store("sqlite://:memory:"))
    rule = RoleRule(api="", resources=[""], namespaces=[NS], verbs=[""])
    for obj in (
        Role(metadata=Metadata(name="bench"), rules=[rule]),
        RoleBinding(metadata=Metadata(name="bench"), users=["bench"], roles=["bench"]),
    ):
        await protection.store.create(obj.store_key(), encode(obj))
    await protection.start()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    guard = Guard(app, **protection.guard_options())
    bearer = f"Bearer {TOKEN}".encode()
    headers = [(b"content-type", b"application/json"), (b"authorization", bearer)]

    async def nothing(*_: Any) -> Any:
        return None

    body = orjson.dumps(application("guarded"))  # the guard parses every body, once

    async def receive() -> Any:
        return {"type": "http.request", "body": body, "more_body": False}

    start = time.perf_counter()
    for _ in range(passes):
        scope = {"type": "http", "method": "POST", "path": APPS, "query_string": b"",
                 "headers": headers}  # fmt: skip
        await guard(scope, receive, nothing)
    cost = (time.perf_counter() - start) / passes * 1e6
    await protection.stop()
    return cost


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def creates_only(port: int, process: subprocess.Popen[bytes], objects: int,
                       parallel: int) -> tuple[float, float]:
    """Creates/s and the server's CPU ms per create, for ``objects`` applications."""
    connector = aiohttp.TCPConnector(limit=parallel + 2)
    headers = {"content-type": "application/json"}
    async with aiohttp.ClientSession(
        f"http://127.0.0.1:{port}", connector=connector, headers=headers
    ) as http:
        await wait_ready(http, process)
        bodies = [orjson.dumps(application(f"app-{i:06d}")) for i in range(objects)]

        async def create(i: int) -> None:
            async with http.post(APPS, data=bodies[i]) as response:
                if response.status >= 300:
                    raise RuntimeError(f"create: {response.status} {await response.text()}")

        await run_many(min(200, objects), parallel, lambda i: create(objects - 1 - i))  # warm
        cpu = cpu_seconds(process.pid)
        elapsed, _ = await run_many(objects - min(200, objects), parallel, create)
        done = objects - min(200, objects)
        return done / elapsed, (cpu_seconds(process.pid) - cpu) / done * 1e3


def compare_schemas(objects: int, parallel: int, rounds: int) -> None:
    """Creates with manifest schemas on and off, fresh servers, alternating order."""
    results: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    for round_ in range(rounds):
        for mode in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
            env = {**os.environ, "SHOAL_MANIFEST_SCHEMAS": mode}
            with tempfile.TemporaryDirectory() as tmp:
                port = free_ports(1)  # bound later, by the server process
                process = subprocess.Popen(
                    [sys.executable, "-c", SERVER, f"sqlite://{tmp}/shoal.db", str(port)],
                    cwd=Path(__file__).resolve().parent.parent, env=env,
                )
                try:
                    results[mode].append(asyncio.run(creates_only(port, process, objects,
                                                                  parallel)))
                finally:
                    process.terminate()
                    process.wait(10)
            rate, cpu = results[mode][-1]
            print(f"round {round_ + 1} schemas {mode:>3}: {rate:,.0f} creates/s, "
                  f"{cpu:.2f} ms CPU per create", flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nCreates of a one-Deployment application, {rounds} rounds of {objects}, "
          f"{parallel} in flight, load average {load}\n")
    print(f"{'':<28}{'schemas on':>14}{'schemas off':>14}{'on / off':>10}")
    for label, index, fmt in (("creates/s (median)", 0, ",.0f"),
                              ("API CPU ms per create", 1, ".2f")):
        on = statistics.median(r[index] for r in results["on"])
        off = statistics.median(r[index] for r in results["off"])
        print(f"{label:<28}{on:>14{fmt}}{off:>14{fmt}}{on / off:>10.2f}")
    on, off = check_cost("on"), check_cost("off")
    label = "admission check µs CPU"
    print(f"{label:<28}{on:>14.1f}{off:>14.1f}{on / off:>10.2f}   (in process, per create)")


def check_cost(mode: str, passes: int = 20_000) -> float:
    """CPU µs of the create rules (shoal.model.validation) on the bench's application."""
    from shoal.model import validation
    from shoal.model.kubernetes import Application

    os.environ["SHOAL_MANIFEST_SCHEMAS"] = mode
    app = Application.model_validate(application("app-000001"))
    validation.check(app)  # compiles the validator once
    start = time.process_time()
    for _ in range(passes):
        validation.check(app)
    return (time.process_time() - start) / passes * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store",
        default="sqlite",
        help="sqlite (temp file), etcd (a fresh one-member etcd) or etcd://host:port",
    )
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument(
        "--rbac", action="store_true", help="Bearer token, RBAC and secrets key, as shoal up"
    )
    parser.add_argument(
        "--compare-schemas",
        action="store_true",
        help="Only creates, with manifest schema validation on and off, side by side",
    )
    parser.add_argument("--rounds", type=int, default=4, help="Rounds of --compare-schemas")
    args = parser.parse_args()
    if args.compare_schemas:
        compare_schemas(args.objects, args.parallel, args.rounds)
        return
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        if args.store == "sqlite":
            store_url = f"sqlite://{os.path.join(tmp, 'shoal.db')}"
        elif args.store == "etcd":
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.fixtures.etcd import running_etcd

            store_url = stack.enter_context(running_etcd()).url
        elif args.store.startswith(("etcd://", "sqlite://")):
            store_url = args.store
        else:
            raise SystemExit(f"unknown store {args.store!r}: sqlite, etcd or etcd://host:port")
        port = free_ports(1)  # bound later, by the server process
        secured: list[str] = []
        if args.rbac:
            tokens, key = Path(tmp, "tokens.csv"), Path(tmp, "secrets.key")
            tokens.write_text(f"{TOKEN},bench,bench\n")
            key.write_text("eHl6eHl6eHl6eHl6eHl6eHl6eHl6eHl6eHl6eHl6eHk=\n")  # 32 bytes, a bench
            secured = [str(tokens), NS, str(key)]
        process = subprocess.Popen(
            [sys.executable, "-c", SERVER, store_url, str(port), *secured],
            cwd=Path(__file__).resolve().parent.parent,
        )
        try:
            rows = asyncio.run(
                bench(port, process, args.objects, args.parallel, args.watchers, args.rbac)
            )
            if args.rbac:
                cost = asyncio.run(guard_cost(Path(secured[0]), Path(secured[2])))
                creates = float(rows[1][1].split()[0].replace(",", ""))
                share = cost * creates / 1e6 * 100
                rows.append(("authn + RBAC per request (alone)", f"{cost:.1f} µs"))
                rows.append(("  as a share of one create", f"{share:.1f} %"))
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
    port = free_ports(1)  # bound later, by the server process
    process = subprocess.Popen([sys.executable, "-c", FLOOR_SERVER, str(port)],
                               cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
    try:
        floor = asyncio.run(floor_cost(port, process, args.objects, args.parallel))
    finally:
        process.terminate()
        process.wait(10)
    rows.append(("floor: CPU per GET of a bare ASGI app, same server", f"{floor * 1e6:.0f} µs"))
    width = max(len(name) for name, _ in rows)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nShoal API benchmark — store {args.store}, {'RBAC' if args.rbac else 'open'}, "
        f"{os.cpu_count()} CPUs, "
        f"load average {load} (at the end)\n"
    )
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 16}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
