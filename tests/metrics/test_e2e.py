"""A real Prometheus drives placement: migration on a gauge change, and an outage that heals."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
from aiohttp import web

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata, ReasonCode
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    MetricProviderRef,
    MetricSpec,
    MetricsProviderSpec,
    PrometheusSpec,
)
from shoal.model.kubernetes import Cluster, ClusterState
from tests.fixtures.prometheus import PrometheusServer, start_prometheus
from tests.fixtures.serving import serve
from tests.scheduler.helpers import (
    NS,
    app,
    bound_to,
    cluster,
    fast_config,
    provider,
    register,
    running,
)
from tests.util import free_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GAUGES = {"e2e_cost_a": 2.0, "e2e_cost_b": 6.0, "e2e_heat": 5.0}


@pytest.fixture(scope="module")
def prom() -> Iterator[PrometheusServer]:
    """Our own Prometheus: these tests change its gauges."""
    with start_prometheus(GAUGES) as server:
        yield server


def prometheus_provider(name: str, url: str) -> GlobalMetricsProvider:
    return GlobalMetricsProvider(
        metadata=Metadata(name=name),
        spec=MetricsProviderSpec(type="prometheus", prometheus=PrometheusSpec(url=url)),
    )


def prom_metric(name: str, provider_name: str, hi: float = 10.0) -> GlobalMetric:
    return GlobalMetric(
        metadata=Metadata(name=name),
        spec=MetricSpec(min=0, max=hi, provider=MetricProviderRef(name=provider_name, metric=name)),
    )


async def _bound(client: ShoalClient, name: str, to: str, timeout: float = 8.0) -> None:
    async def check() -> bool:
        return await bound_to(client, name) == to

    await wait_for(check, timeout=timeout, message=f"{name} on {to}")


async def test_prometheus_gauge_change_migrates(
    api: ApiServer, client: ShoalClient, prom: PrometheusServer
) -> None:
    prom.set("e2e_cost_a", 2.0)
    prom.set("e2e_cost_b", 6.0)
    await client.create(prometheus_provider("prom", prom.url))
    for name in ("e2e_cost_a", "e2e_cost_b"):
        await client.create(prom_metric(name, "prom"))
    await register(client, cluster("a", metrics={"e2e_cost_a": 1}))
    await register(client, cluster("b", metrics={"e2e_cost_b": 1}))
    config = fast_config(metrics_refresh=0.25, reschedule_after=60)
    async with running(api.url, config) as sch:
        for i in range(3):
            await client.create(app(f"web{i}"))
        for i in range(3):
            await _bound(client, f"web{i}", "b")  # 0.6 > 0.2
        # The gauge moves in Prometheus; within a scrape and a refresh everything moves.
        prom.set("e2e_cost_a", 9.0)
        for i in range(3):
            await _bound(client, f"web{i}", "a")
        # One batched request per refresh to the provider, however many apps and clusters.
        stats = sch.metrics.stats()["prom"]
        assert stats["fetches"] >= 2
        assert stats["requests"] == stats["fetches"]
        assert stats["metrics"] == 2
        assert stats["errors"] == 0


@asynccontextmanager
async def proxy(port: int, upstream: str) -> AsyncIterator[None]:
    """A Prometheus on ``port`` (forwarding to ``upstream``), up for the duration."""
    async with httpx.AsyncClient(base_url=upstream) as session:

        async def forward(request: web.Request) -> web.Response:
            response = await session.request(
                request.method,
                request.path,
                params=dict(request.query),
                content=await request.read(),
                headers={"content-type": request.headers.get("content-type", "")},
            )
            return web.Response(
                body=response.content,
                status=response.status_code,
                content_type="application/json",
            )

        server = web.Application()
        server.router.add_route("*", "/{tail:.*}", forward)
        async with serve(server, port):
            yield


async def test_unreachable_prometheus_fails_then_heals(
    api: ApiServer, client: ShoalClient, prom: PrometheusServer
) -> None:
    prom.set("e2e_heat", 5.0)
    port = free_port()  # nothing listens here yet
    await client.create(prometheus_provider("flaky", f"http://127.0.0.1:{port}"))
    await client.create(prom_metric("e2e_heat", "flaky"))
    await client.create(provider("static", {"fallback": 0.2}))
    await client.create(prom_metric("fallback", "static", hi=1.0))
    await register(client, cluster("remote", metrics={"e2e_heat": 1}))
    await register(client, cluster("local", metrics={"fallback": 1}))
    config = fast_config(metrics_refresh=0.25, metrics_timeout=1)
    async with running(api.url, config):

        async def cluster_in(state: ClusterState) -> Cluster | None:
            c = await client.get(Cluster, "remote", NS)
            return c if c.status.state is state else None

        async def provider_down() -> GlobalMetricsProvider | None:
            p = await client.get(GlobalMetricsProvider, "flaky")
            return p if p.status.errors > 0 else None

        down = await wait_for(provider_down, timeout=5)
        assert down.status.reason is not None
        assert down.status.reason.code is ReasonCode.UNREACHABLE_METRICS_PROVIDER
        # No application was ranked on it yet: ONLINE, as Krake leaves a registered cluster.
        still = await client.get(Cluster, "remote", NS)
        assert still.status.state is ClusterState.ONLINE and still.status.metrics_reasons == {}

        # Its metric fails: the application goes to "local", and "remote" is FAILING_METRICS.
        await client.create(app("before"))
        await _bound(client, "before", "local")
        sick = await wait_for(lambda: cluster_in(ClusterState.FAILING_METRICS), timeout=5)
        assert set(sick.status.metrics_reasons) == {"e2e_heat"}
        reason = sick.status.metrics_reasons["e2e_heat"]
        assert reason.code is ReasonCode.UNREACHABLE_METRICS_PROVIDER
        assert f"127.0.0.1:{port}" in reason.message

        # Prometheus becomes reachable at that address: back to ONLINE without any help.
        async with proxy(port, prom.url):
            healed = await wait_for(lambda: cluster_in(ClusterState.ONLINE), timeout=8)
            assert healed.status.metrics_reasons == {}

            async def provider_up() -> GlobalMetricsProvider | None:
                p = await client.get(GlobalMetricsProvider, "flaky")
                return p if p.status.errors == 0 and p.status.reason is None else None

            await wait_for(provider_up, timeout=5)
            # e2e_heat 5/10 = 0.5 beats fallback 0.2 (+ stickiness on local: 0.27).
            await _bound(client, "before", "remote")
            await client.create(app("after"))
            await _bound(client, "after", "remote")
