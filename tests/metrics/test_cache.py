"""The metric cache: scope rules, batching per provider, validity, change notification, health."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from prometheus_client import REGISTRY

from shoal.model.base import Metadata, ReasonCode
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    InfluxSpec,
    KafkaSpec,
    Metric,
    MetricProviderRef,
    MetricSpec,
    MetricsProvider,
    MetricsProviderSpec,
    PrometheusSpec,
    StaticSpec,
)
from shoal.scheduler.metrics.cache import MetricCache, MetricKey, MetricValue
from shoal.scheduler.metrics.providers import MetricError
from tests.fixtures.fake_ksqldb import FakeKsqlDB
from tests.fixtures.influx import InfluxServer
from tests.fixtures.prometheus import PrometheusServer
from tests.util import free_port, wait_for


def spec(
    provider: str, metric: str, lo: float = 0, hi: float = 10, allowed: Sequence[float] = ()
) -> MetricSpec:
    return MetricSpec(
        min=lo,
        max=hi,
        allowed_values=list(allowed),
        provider=MetricProviderRef(name=provider, metric=metric),
    )


def gmetric(
    name: str, provider: str, metric: str | None = None, lo: float = 0, hi: float = 10
) -> GlobalMetric:
    return GlobalMetric(metadata=Metadata(name=name), spec=spec(provider, metric or name, lo, hi))


def nmetric(ns: str, name: str, provider: str, metric: str | None = None) -> Metric:
    return Metric(metadata=Metadata(name=name, namespace=ns), spec=spec(provider, metric or name))


def static(values: dict[str, float]) -> MetricsProviderSpec:
    return MetricsProviderSpec(type="static", static=StaticSpec(metrics=values))


def gprovider(name: str, provider_spec: MetricsProviderSpec) -> GlobalMetricsProvider:
    return GlobalMetricsProvider(metadata=Metadata(name=name), spec=provider_spec)


def nprovider(ns: str, name: str, provider_spec: MetricsProviderSpec) -> MetricsProvider:
    return MetricsProvider(metadata=Metadata(name=name, namespace=ns), spec=provider_spec)


def err(result: MetricValue | MetricError) -> ReasonCode | None:
    return result.code if isinstance(result, MetricError) else None


async def test_lookup_values_and_normalisation() -> None:
    async with MetricCache() as cache:
        cache.set_provider(gprovider("static", static({"heat": 2.5})))
        cache.set_metric(gmetric("heat", "static", lo=0, hi=5))
        await cache.refresh_now()
        assert cache.lookup("heat", False, None) == MetricValue(value=2.5, normalised=0.5)
        # a global reference from a namespaced resource still finds the GlobalMetric
        assert cache.lookup("heat", False, "team-a") == MetricValue(value=2.5, normalised=0.5)


async def test_scope_rules() -> None:
    async with MetricCache() as cache:
        cache.set_provider(gprovider("gp", static({"m": 1})))
        cache.set_provider(nprovider("a", "np", static({"m": 2})))
        cache.set_metric(gmetric("g-ok", "gp", "m"))
        cache.set_metric(gmetric("g-namespaced-provider", "np", "m"))
        cache.set_metric(nmetric("a", "n-ok", "np", "m"))
        cache.set_metric(nmetric("a", "n-global-provider", "gp", "m"))
        cache.set_metric(nmetric("b", "n-other-ns-provider", "np", "m"))
        await cache.refresh_now()
        assert cache.lookup("g-ok", False, None) == MetricValue(1, 0.1)
        assert cache.lookup("n-ok", True, "a") == MetricValue(2, 0.2)
        no_ns = cache.lookup("n-ok", True, None)
        assert err(no_ns) == ReasonCode.UNKNOWN_METRIC and "without a namespace" in str(no_ns)
        assert err(cache.lookup("n-ok", True, "b")) == ReasonCode.UNKNOWN_METRIC
        assert err(cache.lookup("n-ok", False, None)) == ReasonCode.UNKNOWN_METRIC
        assert err(cache.lookup("g-ok", True, "a")) == ReasonCode.UNKNOWN_METRIC
        assert err(cache.lookup("nothing", False, None)) == ReasonCode.UNKNOWN_METRIC
        for name, namespaced, ns in [
            ("g-namespaced-provider", False, None),
            ("n-global-provider", True, "a"),
            ("n-other-ns-provider", True, "b"),
        ]:
            assert err(cache.lookup(name, namespaced, ns)) == ReasonCode.UNKNOWN_METRICS_PROVIDER


async def test_invalid_metric_values() -> None:
    async with MetricCache() as cache:
        cache.set_provider(gprovider("s", static({"low": -1, "high": 11, "odd": 3, "ok": 4})))
        cache.set_metric(gmetric("low", "s"))
        cache.set_metric(gmetric("high", "s"))
        cache.set_metric(
            GlobalMetric(metadata=Metadata(name="odd"), spec=spec("s", "odd", allowed=(2, 4)))
        )
        cache.set_metric(
            GlobalMetric(metadata=Metadata(name="ok"), spec=spec("s", "ok", allowed=(2, 4)))
        )
        cache.set_metric(gmetric("absent", "s"))
        await cache.refresh_now()
        for name in ("low", "high", "odd"):
            assert err(cache.lookup(name, False, None)) == ReasonCode.INVALID_METRIC, name
        assert cache.lookup("ok", False, None) == MetricValue(4, 0.4)
        assert err(cache.lookup("absent", False, None)) == ReasonCode.UNKNOWN_METRIC


@pytest.mark.usefixtures("tenants_may_reach_loopback")
async def test_one_fetch_per_provider_per_refresh(fake_ksqldb: FakeKsqlDB) -> None:
    fake_ksqldb.tables["METRICS"].rows.update({f"k{i}": i / 10 for i in range(5)})
    kafka = MetricsProviderSpec(
        type="kafka",
        kafka=KafkaSpec(
            url=fake_ksqldb.url, table="metrics", comparison_column="name", value_column="val"
        ),
    )
    async with MetricCache() as cache:
        cache.set_provider(gprovider("kafka", kafka))
        cache.set_provider(gprovider("static", static({"s": 1})))
        for ns in ("a", "b"):
            cache.set_provider(nprovider(ns, "kafka", kafka))
            cache.set_metric(nmetric(ns, "k0", "kafka"))
        # 10 metrics on 5 provider metrics: two names for each
        for i in range(5):
            cache.set_metric(gmetric(f"k{i}", "kafka"))
            cache.set_metric(gmetric(f"alias-{i}", "kafka", f"k{i}"))
            cache.set_metric(gmetric(f"s{i}", "static", "s"))
        for _ in range(3):
            await cache.refresh_now()
            for _ in range(100):  # many clusters and applications looking up
                for i in range(5):
                    assert cache.lookup(f"k{i}", False, None) == MetricValue(i / 10, i / 100)
                    assert cache.lookup(f"alias-{i}", False, None) == MetricValue(i / 10, i / 100)
                assert cache.lookup("k0", True, "a") == MetricValue(0, 0)
        stats = cache.stats()
        assert stats["kafka"] == {"fetches": 3, "requests": 3, "errors": 0, "metrics": 5}
        assert stats["a/kafka"]["fetches"] == 3 and stats["a/kafka"]["metrics"] == 1
        assert stats["static"]["fetches"] == 3 and stats["static"]["metrics"] == 1
        assert len(fake_ksqldb.queries) == 3 * 3  # global + two namespaces, per refresh
        assert cache.refreshes == 3


async def test_on_change_reports_only_changed_metrics() -> None:
    calls: list[set[MetricKey]] = []

    async def on_change(changed: set[MetricKey]) -> None:
        calls.append(changed)

    async with MetricCache(on_change=on_change) as cache:
        cache.set_provider(gprovider("s", static({"a": 1, "b": 2})))
        cache.set_provider(nprovider("ns", "s", static({"a": 3})))
        cache.set_metric(gmetric("a", "s"))
        cache.set_metric(gmetric("b", "s"))
        cache.set_metric(nmetric("ns", "a", "s"))
        await cache.refresh_now()
        assert calls == [{(False, None, "a"), (False, None, "b"), (True, "ns", "a")}]
        assert await cache.refresh_now() == set()
        assert len(calls) == 1  # nothing changed, no call
        cache.set_provider(gprovider("s", static({"a": 1, "b": 5})))
        await cache.refresh_now()
        assert calls[-1] == {(False, None, "b")}
        cache.set_metric(gmetric("a", "s", hi=20))  # a new range changes the normalised value
        cache.remove_metric("Metric", "ns", "a")
        await cache.refresh_now()
        assert calls[-1] == {(False, None, "a"), (True, "ns", "a")}
        assert err(cache.lookup("a", True, "ns")) == ReasonCode.UNKNOWN_METRIC


class CountingCache(MetricCache):
    """Counts lookups: a refresh's cost is the number it makes."""

    lookups = 0

    def lookup(
        self, name: str, namespaced: bool, namespace: str | None
    ) -> MetricValue | MetricError:
        self.lookups += 1
        return super().lookup(name, namespaced, namespace)


async def test_a_refresh_looks_up_only_the_values_that_moved(fake_ksqldb: FakeKsqlDB) -> None:
    rows = fake_ksqldb.tables["METRICS"].rows
    rows.update({f"k{i}": i / 1000 for i in range(1000)})
    kafka = MetricsProviderSpec(
        type="kafka",
        kafka=KafkaSpec(
            url=fake_ksqldb.url, table="metrics", comparison_column="name", value_column="val"
        ),
    )
    calls: list[set[MetricKey]] = []
    async with CountingCache(on_change=calls.append) as cache:
        cache.set_provider(gprovider("kafka", kafka))
        for i in range(1000):  # two metrics read each value
            cache.set_metric(gmetric(f"k{i}", "kafka", lo=0, hi=1))
            cache.set_metric(gmetric(f"alias-{i}", "kafka", f"k{i}", lo=0, hi=1))
        await cache.refresh_now()
        assert len(calls[-1]) == 2000
        cache.lookups = 0
        assert await cache.refresh_now() == set()
        assert cache.lookups == 0  # nothing fetched moved: nothing looked up

        rows["k5"] = 0.5
        del rows["k7"]
        changed = await cache.refresh_now()
        key = lambda name: (False, None, name)  # noqa: E731
        assert changed == {key("k5"), key("alias-5"), key("k7"), key("alias-7")}
        assert calls[-1] == changed
        assert cache.lookups == 4
        assert cache.lookup("alias-5", False, None) == MetricValue(0.5, 0.5)
        assert err(cache.lookup("alias-7", False, None)) is not None
        rows["k7"] = 0.25
        assert await cache.refresh_now() == {key("k7"), key("alias-7")}

        # a definition changes, a metric goes: the changed one alone is looked up again
        cache.set_metric(gmetric("k1", "kafka", lo=0, hi=0.01))
        cache.remove_metric("GlobalMetric", None, "alias-2")
        cache.lookups = 0
        assert await cache.refresh_now() == {key("k1"), key("alias-2")}
        assert cache.lookups == 1
        assert err(cache.lookup("alias-2", False, None)) == ReasonCode.UNKNOWN_METRIC
        assert cache.lookup("k1", False, None) == MetricValue(0.001, 0.1)
        rows["k1"] = 0.002
        assert await cache.refresh_now() == {key("k1"), key("alias-1")}


async def test_unreachable_provider_health_and_prometheus_metrics() -> None:
    calls: list[set[MetricKey]] = []
    down = MetricsProviderSpec(
        type="prometheus", prometheus=PrometheusSpec(url=f"http://127.0.0.1:{free_port()}")
    )
    async with MetricCache(on_change=calls.append, timeout=2) as cache:
        cache.set_provider(gprovider("down", down))
        cache.set_metric(gmetric("m", "down"))
        before = REGISTRY.get_sample_value(
            "shoal_metrics_provider_errors_total", {"provider": "down"}
        )
        await cache.refresh_now()
        await cache.refresh_now()
        assert err(cache.lookup("m", False, None)) == ReasonCode.UNREACHABLE_METRICS_PROVIDER
        assert len(calls) == 1  # the same error twice is no change
        health = cache.health()[(False, None, "down")]
        assert health.consecutive_errors == 2 and health.last_fetch is not None
        assert health.latency is not None and health.latency >= 0
        status = cache.provider_status(False, None, "down")
        assert status is not None and status.errors == 2
        assert status.reason is not None
        assert status.reason.code == ReasonCode.UNREACHABLE_METRICS_PROVIDER
        after = REGISTRY.get_sample_value(
            "shoal_metrics_provider_errors_total", {"provider": "down"}
        )
        assert after == (before or 0) + 2
        count = REGISTRY.get_sample_value(
            "shoal_metrics_provider_fetch_seconds_count", {"provider": "down"}
        )
        assert count is not None and count >= 2
        cache.set_provider(gprovider("down", static({"m": 1})))  # repaired
        await cache.refresh_now()
        assert cache.lookup("m", False, None) == MetricValue(1, 0.1)
        assert cache.health()[(False, None, "down")].consecutive_errors == 0
        cache.remove_provider("GlobalMetricsProvider", None, "down")
        assert err(cache.lookup("m", False, None)) == ReasonCode.UNKNOWN_METRICS_PROVIDER
        assert cache.provider_status(False, None, "down") is None


async def test_track_limits_fetching_and_lookups_add_demand() -> None:
    async with MetricCache() as cache:
        cache.set_provider(gprovider("s", static({"a": 1, "b": 2})))
        cache.set_metric(gmetric("a", "s"))
        cache.set_metric(gmetric("b", "s"))
        cache.track([(False, None, "a")])
        await cache.refresh_now()
        assert cache.stats()["s"]["metrics"] == 1
        assert cache.lookup("a", False, None) == MetricValue(1, 0.1)
        pending = cache.lookup("b", False, None)
        assert err(pending) == ReasonCode.UNREACHABLE_METRICS_PROVIDER
        assert "fetched yet" in str(pending)
        await cache.refresh_pending()  # only b
        assert cache.lookup("b", False, None) == MetricValue(2, 0.2)
        assert cache.stats()["s"]["metrics"] == 1  # the pending fetch asked for b alone
        await cache.refresh_now()
        assert cache.stats()["s"]["metrics"] == 2  # b stays in use once looked up
        cache.track(None)
        await cache.refresh_now()
        assert cache.stats()["s"]["metrics"] == 2


async def test_run_refreshes_periodically_and_fetches_new_metrics_at_once() -> None:
    async with MetricCache(refresh_interval=0.2) as cache:
        cache.set_provider(gprovider("s", static({"a": 1, "b": 2})))
        cache.set_metric(gmetric("a", "s"))
        task = asyncio.create_task(cache.run())
        try:
            await wait_for(lambda: cache.refreshes >= 3, timeout=5, message="3 refreshes")
            cache.refresh_interval = 60  # no more full refreshes for the rest of the test
            await asyncio.sleep(0.25)
            cache.set_metric(gmetric("b", "s"))
            await wait_for(
                lambda: isinstance(cache.lookup("b", False, None), MetricValue),
                timeout=2,
                message="new metric fetched without waiting for the interval",
            )
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


@pytest.mark.usefixtures("tenants_may_reach_loopback")
@pytest.mark.integration
async def test_cache_with_real_prometheus_and_influx(
    prometheus: PrometheusServer, influxd: InfluxServer
) -> None:
    influxd.write("heat value=40", "power value=0.5")
    async with MetricCache(timeout=5) as cache:
        cache.set_provider(
            gprovider(
                "prom",
                MetricsProviderSpec(
                    type="prometheus", prometheus=PrometheusSpec(url=prometheus.url)
                ),
            )
        )
        cache.set_provider(
            nprovider(
                "team",
                "influx",
                MetricsProviderSpec(
                    type="influx",
                    influx=InfluxSpec(url=influxd.url, version=1, database=influxd.database),
                ),
            )
        )
        for name in ("shoal_load", "shoal_cost", "shoal_heat"):
            cache.set_metric(gmetric(name, "prom"))
        cache.set_metric(gmetric("missing", "prom", "shoal_missing"))
        cache.set_metric(
            Metric(
                metadata=Metadata(name="heat", namespace="team"),
                spec=spec("influx", "heat", hi=100),
            )
        )
        cache.set_metric(nmetric("team", "power", "influx"))
        changed = await cache.refresh_now()
        assert len(changed) == 6
        assert cache.lookup("shoal_load", False, None) == MetricValue(0.25, 0.025)
        assert cache.lookup("shoal_heat", False, None) == MetricValue(7.5, 0.75)
        assert err(cache.lookup("missing", False, None)) == ReasonCode.UNKNOWN_METRIC
        assert cache.lookup("heat", True, "team") == MetricValue(40, 0.4)
        assert cache.lookup("power", True, "team") == MetricValue(0.5, 0.05)
        stats = cache.stats()
        assert stats["prom"]["requests"] == 1 and stats["team/influx"]["requests"] == 1
