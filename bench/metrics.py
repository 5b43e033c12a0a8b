"""Metric-driven scheduling at scale with a real Prometheus as the metrics provider.

N clusters × 3 GlobalMetrics (3N metrics; clusters come in G groups whose
metrics read the same 3G gauges of a real Prometheus, scraped every second),
M applications (label constraint ``zone is zK``, 4 zones). Prometheus itself
cannot answer one batched query over 3,000 names in time (the chain of 3,000
``or`` times out after 30 s), hence the groups.
The API and the scheduler run in processes of their own; Prometheus is
reached through a counting proxy in this process, so the figures show the
provider requests per metric-cache refresh (one batched request per
provider and refresh, not one per application × cluster). Then the gauges of
the 4 winning clusters drop to 0 and every application migrates: time from
the gauge change to the last migration.

    .venv/bin/python bench/metrics.py [--clusters 1000] [--apps 10000] [--groups 50]
        [--refresh 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import random
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from aiohttp import web  # noqa: E402

from shoal.client.rest import Conflict, ShoalClient, Unreachable  # noqa: E402
from shoal.model.base import Metadata  # noqa: E402
from shoal.model.core import GlobalMetricsProvider, MetricsProviderSpec, PrometheusSpec  # noqa: E402
from shoal.model.kubernetes import Application  # noqa: E402
from shoal.testing.builders import app, cluster, metric, register  # noqa: E402
from shoal.testing.launch import ApiProcess, controller, stop  # noqa: E402
from tests.fixtures import prometheus as _prometheus  # noqa: E402
from tests.fixtures.prometheus import start_prometheus  # noqa: E402
from tests.util import free_port  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_schedule", ROOT / "bench" / "schedule.py")
assert _spec is not None and _spec.loader is not None
_schedule: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_schedule)
bounded, synced = _schedule.bounded, _schedule.synced

NS = "default"
ZONES = 4
_HTTP = httpx.Client(timeout=5)


def _query(self: Any, query: str) -> list[dict[str, Any]]:
    """The fixture's readiness check, on one kept-alive connection (3,000 gauges)."""
    response = _HTTP.get(f"{self.url}/api/v1/query", params={"query": query})
    response.raise_for_status()
    result: list[dict[str, Any]] = response.json()["data"]["result"]
    return result


_prometheus.PrometheusServer.query = _query  # type: ignore[method-assign]


def gauge(i: int, k: int, groups: int) -> str:
    """Prometheus name of cluster i's k-th metric: clusters of one group share values."""
    return f"bench_g{i % groups:04d}_m{k}"


def metric_name(i: int, k: int) -> str:
    """Shoal name: one GlobalMetric per cluster and k (3N of them)."""
    return f"bench-c{i:04d}-m{k}"


class CountingProxy:
    """Forwards to Prometheus and records when each query request arrives."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.queries: list[float] = []
        self.query_bytes: list[int] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._http = httpx.AsyncClient(base_url=upstream, timeout=30)

    async def _forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.path.startswith("/api/v1/query"):
            self.queries.append(time.monotonic())
            self.query_bytes.append(len(body) + len(request.query_string))
        response = await self._http.request(
            request.method,
            request.path,
            params=dict(request.query),
            content=body,
            headers={"content-type": request.headers.get("content-type", "")},
        )
        return web.Response(
            body=response.content, status=response.status_code, content_type="application/json"
        )

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        await self._http.aclose()

    def bursts(self, since: float, gap: float) -> list[int]:
        """Requests per refresh: requests closer than ``gap`` belong to one refresh."""
        sizes: list[int] = []
        last = None
        for t in (t for t in self.queries if t >= since):
            if last is None or t - last > gap:
                sizes.append(0)
            sizes[-1] += 1
            last = t
        return sizes


async def fleet(client: ShoalClient, n: int, groups: int, prom_url: str) -> None:
    await client.create(
        GlobalMetricsProvider(
            metadata=Metadata(name="prometheus"),
            spec=MetricsProviderSpec(type="prometheus", prometheus=PrometheusSpec(url=prom_url)),
        )
    )

    async def create_metric(j: int) -> None:
        i, k = divmod(j, 3)
        await client.create(metric(metric_name(i, k), "prometheus", key=gauge(i, k, groups)))

    async def create_cluster(i: int) -> None:
        labels = {"zone": f"z{i % ZONES}"}
        weights = {metric_name(i, k): k + 1 for k in range(3)}
        await register(client, cluster(f"c{i:04d}", labels=labels, metrics=weights))

    await bounded(3 * n, 32, create_metric)
    await bounded(n, 32, create_cluster)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def run(n: int, m: int, groups: int, refresh: float, workers: int, seed: int) -> None:
    rng = random.Random(seed)
    values = {gauge(g, k, groups): rng.random() for g in range(groups) for k in range(3)}
    t = time.monotonic()
    with start_prometheus(values) as prom, tempfile.TemporaryDirectory() as tmp:
        print(f"Prometheus with {len(values)} gauges ready in {time.monotonic() - t:.1f} s")
        proxy = CountingProxy(prom.url)
        await proxy.start()
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{Path(tmp) / 'shoal.db'}", cpu=0, secured=False)
        url = api.url
        sched = None
        try:
            await api.wait_ready()
            async with ShoalClient(url, max_connections=72) as client:
                t = time.monotonic()
                await fleet(client, n, groups, proxy.url)
                print(
                    f"{n} clusters, {3 * n} GlobalMetrics reading {len(values)} gauges "
                    f"created in {time.monotonic() - t:.1f} s"
                )
                config = Path(tmp) / "scheduler.json"
                config.write_text(
                    # min_migration_interval 0: the time measured is the reaction, not pacing
                    f'{{"workers": {workers}, "reschedule_after": 600, '
                    f'"min_migration_interval": 0, '
                    f'"metrics_refresh": {refresh}, "metrics_timeout": 10}}'
                )
                sched = controller("scheduler", url, "--config", str(config), cpu=1)
                await synced(client)

                start_rev = (await client.list(Application, NS)).revision
                created: dict[str, float] = {}
                bound_at: dict[str, float] = {}
                placed: dict[str, str] = {}
                moved_at: dict[str, float] = {}
                all_bound = asyncio.Event()
                all_moved = asyncio.Event()
                losers: set[str] = set()

                async def watch() -> None:
                    async for ev in client.watch(Application, NS, resource_version=start_rev):
                        obj = ev.object
                        name = obj.metadata.name
                        if name == "probe" or obj.status.scheduled_to is None:
                            continue
                        if obj.metadata.created is not None:
                            created.setdefault(name, obj.metadata.created.timestamp())
                        target = obj.status.scheduled_to.name
                        if name not in bound_at:
                            bound_at[name] = time.time()
                            if len(bound_at) == m:
                                all_bound.set()
                        elif losers and target not in losers and name not in moved_at:
                            moved_at[name] = time.time()
                            if len(moved_at) == m:
                                all_moved.set()
                        placed[name] = target

                watcher = asyncio.create_task(watch())
                await asyncio.sleep(0.2)

                async def create(i: int) -> None:
                    obj = app(f"a{i:05d}", labels=[f"zone is z{i % ZONES}"])
                    for _ in range(5):
                        try:
                            await client.create(obj)
                            return
                        except Conflict:
                            return
                        except Unreachable:
                            continue
                    raise RuntimeError(f"could not create {obj.metadata.name}")

                window = time.monotonic()
                t0 = time.time()
                await bounded(m, 64, create)
                await asyncio.wait_for(all_bound.wait(), 600)
                t1 = max(bound_at.values())
                lat = [bound_at[k] - created[k] for k in bound_at if k in created]
                print(f"\nplacement: {m} applications on {n} clusters")
                print(f"  all bound in {t1 - t0:.2f} s: {m / (t1 - t0):.0f} apps bound/s")
                p50, p99 = quantile(lat, 0.5), quantile(lat, 0.99)
                print(f"  create→bound p50 {p50:.3f} s, p99 {p99:.3f} s")

                # Migration: the winners' gauges drop to 0; everything moves.
                winners = Counter(placed.values())
                losers.update(winners)
                print(f"  {len(winners)} winning clusters (ties in a group broken at random)")
                t2 = time.time()
                for name in losers:
                    i = int(name[1:])
                    for k in range(3):
                        prom.set(gauge(i, k, groups), 0.0)
                await asyncio.wait_for(all_moved.wait(), 600)
                t3 = max(moved_at.values())
                mig = sorted(moved_at[k] - t2 for k in moved_at)
                print(f"\nmigration: gauges of {len(losers)} winners set to 0 in Prometheus")
                print(
                    f"  {len(moved_at)} applications moved, last {t3 - t2:.2f} s after the "
                    f"change (scrape 1 s + refresh {refresh} s + rebinding); "
                    f"p50 {quantile(mig, 0.5):.2f} s"
                )
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher

                sizes = proxy.bursts(window, gap=refresh / 2)
                seconds = time.monotonic() - window
                print(f"\nprovider requests (Prometheus /api/v1/query) over {seconds:.1f} s:")
                print(
                    f"  {sum(sizes)} requests in {len(sizes)} refreshes: "
                    f"max {max(sizes)} per refresh (1 provider, {3 * n} metrics, "
                    f"{len(values)} distinct provider metrics); "
                    f"query size {max(proxy.query_bytes) / 1024:.0f} KiB"
                )
                print(f"  naive apps × clusters × metrics per pass would be {m * n * 3:,}")
        finally:
            if sched is not None:
                stop(sched)
            api.stop()
            await proxy.close()
    print(f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, SQLite store")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--apps", type=int, default=10000)
    parser.add_argument(
        "--groups", type=int, default=50, help="cluster groups sharing gauges (3 per group)"
    )
    parser.add_argument("--refresh", type=float, default=2.0, help="metrics_refresh (s)")
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(run(args.clusters, args.apps, args.groups, args.refresh, args.workers, args.seed))


if __name__ == "__main__":
    main()
