"""Metric-driven scheduling end to end: in-process API, Scheduler and its MetricCache.

Static providers (and one unreachable Prometheus) keep these fast; the real
Prometheus scenarios are in test_e2e.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from shoal.api.server import ApiServer
from shoal.cli.main import app as cli_app
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata, ReasonCode
from shoal.model.constraints import MetricRef
from shoal.model.core import (
    GlobalMetricsProvider,
    MetricsProvider,
    MetricsProviderSpec,
    PrometheusSpec,
)
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import shipped
from tests.scheduler import helpers as h
from tests.util import free_port, wait_for


async def _cluster_in(
    client: ShoalClient, name: str, state: ClusterState, timeout: float = 5
) -> Cluster:
    async def check() -> Cluster | None:
        c = await client.get(Cluster, name, h.NS)
        return c if c.status.state is state else None

    result: Cluster = await wait_for(check, timeout=timeout, message=f"{name} {state.name}")
    return result


def _closed_prometheus(name: str) -> GlobalMetricsProvider:
    """A Prometheus provider on a port nothing listens on."""
    return GlobalMetricsProvider(
        metadata=Metadata(name=name),
        spec=MetricsProviderSpec(
            type="prometheus", prometheus=PrometheusSpec(url=f"http://127.0.0.1:{free_port()}")
        ),
    )


async def _scored(client: ShoalClient, scores: dict[str, float]) -> None:
    """One cluster per entry, its one metric ``m-NAME`` served by the provider ``static``."""
    await h.static_metrics(client, {f"m-{name}": score for name, score in scores.items()})
    for name in scores:
        await h.register(client, h.cluster(name, metrics={f"m-{name}": 1}))


# --- placement by score -------------------------------------------------------------------


async def test_application_lands_on_highest_score(api: ApiServer, client: ShoalClient) -> None:
    await _scored(client, {"a": 0.2, "b": 0.9, "c": 0.5})
    await h.register(client, h.cluster("plain"))  # no metrics: dropped when others have them
    async with h.running(api.url):
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "b"
        a = await h.get_app(client, "web")
        assert a.status.scheduling is not None
        assert a.status.scheduling["chosen"] == "b"
        assert a.status.scheduling["score"] == pytest.approx(0.9)


async def test_metric_change_migrates_before_reschedule_after(
    api: ApiServer, client: ShoalClient
) -> None:
    await _scored(client, {"a": 0.8, "b": 0.3})
    async with h.running(api.url, h.fast_config(reschedule_after=60, metrics_refresh=0.1)) as sch:
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        before = (await h.get_app(client, "web")).status.scheduled
        await h.set_static(client, {"m-a": 0.1, "m-b": 0.9})
        # Long before reschedule_after (60 s): the metric change alone moves it.
        assert await h.wait_bound(client, "web", to="b", timeout=3) == "b"
        after = await h.get_app(client, "web")
        assert after.status.scheduled is not None and after.status.scheduled != before
        assert sch.apps_handler.bound == 2


async def test_small_change_does_not_beat_stickiness(api: ApiServer, client: ShoalClient) -> None:
    await _scored(client, {"a": 0.5, "b": 0.3})
    async with h.running(api.url, h.fast_config(metrics_refresh=0.1)) as sch:
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        # a with stickiness: (0.1·1 + 0.5·1) / 1.1 ≈ 0.545 > 0.52.
        await h.set_static(client, {"m-b": 0.52})
        await wait_for(
            lambda: sch.metrics.lookup("m-b", False, None).value == 0.52,  # type: ignore[union-attr]
            timeout=3,
            message="cache saw m-b = 0.52",
        )
        decision = sch.apps_handler.decide(await h.get_app(client, "web"))
        assert decision.chosen is not None and decision.chosen.name == "a"
        await asyncio.sleep(0.5)  # a pass queued by mistake would have bound it by now
        assert await h.bound_to(client, "web") == "a"
        assert sch.apps_handler.bound == 1
        # A larger change does.
        await h.set_static(client, {"m-b": 0.6})
        assert await h.wait_bound(client, "web", to="b", timeout=3) == "b"


async def test_min_migration_interval_prevents_flapping(
    api: ApiServer, client: ShoalClient
) -> None:
    await _scored(client, {"a": 0.9, "b": 0.1})
    config = h.fast_config(metrics_refresh=0.1, min_migration_interval=2.0)
    async with h.running(api.url, config) as sch:
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        placed = asyncio.get_running_loop().time()
        first = (await h.get_app(client, "web")).status.scheduled
        # The metrics flap every 0.2 s for 1.2 s: the application must not follow.
        for i in range(6):
            high, low = ("m-b", "m-a") if i % 2 == 0 else ("m-a", "m-b")
            await h.set_static(client, {high: 0.9, low: 0.1})
            await asyncio.sleep(0.2)
            if asyncio.get_running_loop().time() - placed < 1.8:
                assert await h.bound_to(client, "web") == "a"
        assert sch.apps_handler.bound == 1
        # Settled on b winning: it moves once the interval is over, and only once.
        await h.set_static(client, {"m-a": 0.1, "m-b": 0.9})
        assert await h.wait_bound(client, "web", to="b", timeout=4) == "b"
        moved = (await h.get_app(client, "web")).status.scheduled
        assert first is not None and moved is not None
        assert (moved - first).total_seconds() >= 2.0
        await h.set_static(client, {"m-a": 0.9, "m-b": 0.1})
        await asyncio.sleep(0.8)
        assert await h.bound_to(client, "web") == "b"  # just migrated: stays for 2 s
        assert sch.apps_handler.bound == 2


# --- failure reasons ------------------------------------------------------------------------


async def test_failure_reasons_and_failing_clusters_avoided(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.static_metrics(client, {"ok": 0.2, "too-big": 5.0})
    await client.create(h.metric("no-provider", provider_name="ghost"))
    await client.create(_closed_prometheus("down"))
    await client.create(h.metric("remote", provider_name="down"))
    # A Metric uses MetricsProviders of its namespace only, never the global "static".
    await client.create(h.namespaced_metric("ns-metric", "static", "ok"))
    await h.register(client, h.cluster("healthy", metrics={"ok": 1}))
    await h.register(client, h.cluster("unknown", metrics={"nope": 1}))
    await h.register(client, h.cluster("orphan", metrics={"no-provider": 1}))
    await h.register(client, h.cluster("invalid", metrics={"too-big": 1}))
    await h.register(client, h.cluster("unreachable", metrics={"remote": 1, "ok": 1}))
    c = h.cluster("ns-scope")
    c.spec.metrics = [MetricRef(name="ns-metric", weight=1, namespaced=True)]
    await h.register(client, c)
    expected = {
        "unknown": {"nope": ReasonCode.UNKNOWN_METRIC},
        "orphan": {"no-provider": ReasonCode.UNKNOWN_METRICS_PROVIDER},
        "invalid": {"too-big": ReasonCode.INVALID_METRIC},
        "unreachable": {"remote": ReasonCode.UNREACHABLE_METRICS_PROVIDER},
        "ns-scope": {"ns-metric": ReasonCode.UNKNOWN_METRICS_PROVIDER},
    }
    async with h.running(api.url, h.fast_config(metrics_refresh=0.2, metrics_timeout=1)):
        # Failing clusters take no application; ranking for one makes them FAILING_METRICS.
        for i in range(5):
            await client.create(h.app(f"web{i}"))
        for i in range(5):
            assert await h.wait_bound(client, f"web{i}") == "healthy"
        for name, reasons in expected.items():
            got = await _cluster_in(client, name, ClusterState.FAILING_METRICS)
            assert {m: r.code for m, r in got.status.metrics_reasons.items()} == reasons, name
        invalid = await client.get(Cluster, "invalid", h.NS)
        assert "outside [0.0, 1.0]" in invalid.status.metrics_reasons["too-big"].message
        healthy = await client.get(Cluster, "healthy", h.NS)
        assert healthy.status.state is ClusterState.ONLINE
        assert healthy.status.metrics_reasons == {}
        # A namespaced provider of the same name fixes the namespaced metric by itself.
        await client.create(h.namespaced_provider("static", {"ok": 0.9}))
        back = await _cluster_in(client, "ns-scope", ClusterState.ONLINE)
        assert back.status.metrics_reasons == {}
        await client.create(h.app("later"))
        assert await h.wait_bound(client, "later") == "ns-scope"  # 0.9 > 0.2


async def test_clouds_failing_metrics(api: ApiServer, client: ShoalClient) -> None:
    await h.static_metrics(client, {"green": 0.9, "grey": 0.3})
    await client.create(h.metric("broken", provider_name="ghost"))
    await client.create(h.namespaced_metric("local", "mine", "x"))
    await client.create(h.namespaced_provider("mine", {"x": 0.5}))
    await client.create(h.cloud("ns-ok", metrics={"grey": 1}))
    await client.create(h.cloud("ns-broken", metrics={"broken": 1}))
    local = h.cloud("ns-local")
    local.spec.openstack.metrics = [MetricRef(name="local", weight=1, namespaced=True)]
    await client.create(local)
    # A namespaced metric on a global resource is an error: it has no namespace to look in.
    gbad = h.global_cloud("g-namespaced", metrics={"green": 1})
    gbad.spec.openstack.metrics.append(MetricRef(name="local", weight=1, namespaced=True))
    await client.create(gbad)
    await client.create(h.global_cloud("g-ok", metrics={"green": 1}))

    async def state(kind: type[Cloud] | type[GlobalCloud], name: str, want: str) -> Cloud:
        async def check() -> Cloud | None:
            obj = await client.get(kind, name, h.NS if kind is Cloud else None)
            return obj if obj.status.state == want else None  # type: ignore[return-value]

        result: Cloud = await wait_for(check, timeout=5, message=f"{name} {want}")
        return result

    async with h.running(api.url, h.fast_config(metrics_refresh=0.1)):
        broken = await state(Cloud, "ns-broken", "FAILING_METRICS")
        assert broken.status.metrics_reasons["broken"].code is ReasonCode.UNKNOWN_METRICS_PROVIDER
        gb = await state(GlobalCloud, "g-namespaced", "FAILING_METRICS")
        assert set(gb.status.metrics_reasons) == {"local"}
        assert gb.status.metrics_reasons["local"].code is ReasonCode.UNKNOWN_METRIC
        assert "without a namespace" in gb.status.metrics_reasons["local"].message
        for kind, name in ((Cloud, "ns-ok"), (Cloud, "ns-local"), (GlobalCloud, "g-ok")):
            ok = await state(kind, name, "ONLINE")  # type: ignore[arg-type]
            assert ok.status.metrics_reasons == {}
        # A cluster to be created goes to the best healthy cloud (g-ok, 0.9).
        await h.register(client, h.cluster("new", kubeconfig=False))

        async def cloud_of() -> str | None:
            c = await client.get(Cluster, "new", h.NS)
            return c.status.scheduled_to.name if c.status.scheduled_to else None

        assert await wait_for(cloud_of, timeout=5) == "g-ok"
        # The missing provider appears: the cloud comes back by itself.
        await client.create(h.provider("ghost", {"broken": 0.4}))
        await state(Cloud, "ns-broken", "ONLINE")


# --- provider health -------------------------------------------------------------------------


def _cli(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli_app, ["--api", url, *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


async def test_provider_status_and_cli(
    api: ApiServer, client: ShoalClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SHOAL_CONFIG", str(tmp_path / "none.yaml"))
    monkeypatch.delenv("SHOAL_API", raising=False)
    monkeypatch.setenv("SHOAL_TOKEN", shipped.token(shipped.ADMIN))  # the CLI as the admin
    await h.static_metrics(client, {"ok": 0.5})
    await client.create(_closed_prometheus("down"))
    await client.create(h.metric("remote", provider_name="down"))
    await client.create(h.namespaced_provider("mine", {"x": 0.5}))
    await client.create(h.namespaced_metric("local", "mine", "x"))
    async with h.running(api.url, h.fast_config(metrics_refresh=0.1, metrics_timeout=1)) as sch:

        async def status_of(name: str) -> GlobalMetricsProvider | None:
            p = await client.get(GlobalMetricsProvider, name)
            return p if p.status.last_fetch is not None else None

        healthy = await wait_for(lambda: status_of("static"), timeout=5)
        assert healthy.status.reason is None and healthy.status.errors == 0
        assert healthy.status.fetch_latency_seconds is not None
        down = await wait_for(lambda: status_of("down"), timeout=5)
        assert down.status.reason is not None
        assert down.status.reason.code is ReasonCode.UNREACHABLE_METRICS_PROVIDER
        assert down.status.errors >= 1

        async def namespaced() -> MetricsProvider | None:
            p = await client.get(MetricsProvider, "mine", h.NS)
            return p if p.status.last_fetch is not None else None

        assert (await wait_for(namespaced, timeout=5)).status.errors == 0

        # Not written on every refresh: only latency moves, so nothing for 60 s.
        revision = healthy.metadata.resource_version
        refreshes = sch.metrics.refreshes
        await asyncio.sleep(1.0)
        assert sch.metrics.refreshes >= refreshes + 5
        assert (await client.get(GlobalMetricsProvider, "static")).metadata.resource_version == (
            revision
        )

        # The CLI shows it.
        out = await asyncio.to_thread(_cli, api.url, "core", "gmp", "get", "down")
        header, row = out.splitlines()[:2]
        assert header.split()[:6] == ["NAME", "TYPE", "URL", "STATUS", "LAST_FETCH", "LATENCY"]
        assert row.split()[3].startswith("UNREACHABLE_METRICS_PROVIDER(")
        out = await asyncio.to_thread(_cli, api.url, "core", "gmp", "list")
        static_row = next(line for line in out.splitlines() if line.startswith("static"))
        assert static_row.split()[2:4] == ["-", "OK"]
        out = await asyncio.to_thread(_cli, api.url, "core", "mp", "get", "mine", "-n", h.NS)
        assert out.splitlines()[1].split()[4] == "OK"

        # The cache's Prometheus metrics are on the API's /metrics (same process, as `shoal up`).
        admin = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
        async with httpx.AsyncClient(headers=admin) as session:
            text = (await session.get(f"{api.url}/metrics")).text
        assert 'shoal_metrics_provider_fetch_seconds_count{provider="static"}' in text
        assert 'shoal_metrics_provider_fetch_seconds_count{provider="default/mine"}' in text
        assert 'shoal_metrics_provider_errors_total{provider="down"}' in text


async def test_status_sync_is_idempotent(api: ApiServer, client: ShoalClient) -> None:
    """Direct call: a second sync right after the first writes nothing."""
    await h.static_metrics(client, {"ok": 0.5})
    async with h.running(api.url, h.fast_config(metrics_refresh=30)) as sch:
        assert isinstance(sch, Scheduler)
        await sch.metrics.refresh_now()
        await wait_for(lambda: sch.sync_provider_status(), timeout=3, message="first write")
        await wait_for(
            lambda: sch._informer_of(GlobalMetricsProvider).get("static").status.last_fetch,
            timeout=3,
            message="informer saw the status",
        )
        assert await sch.sync_provider_status() == 0
