"""Metrics provider clients against real Prometheus/InfluxDB 1.x and fake ksqlDB/InfluxDB 2."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import aiohttp
import httpx
import pytest
import yarl
from aiohttp import web

from shoal.model.base import ReasonCode
from shoal.model.core import (
    InfluxSpec,
    KafkaSpec,
    MetricsProviderSpec,
    PrometheusSpec,
    StaticSpec,
)
from shoal.scheduler.metrics.providers import (
    InfluxV1Client,
    InfluxV2Client,
    KafkaClient,
    MetricError,
    MetricsProviderClient,
    PrometheusClient,
    StaticClient,
    flux_query,
    ksql_query,
    parse_annotated_csv,
    prometheus_batch_query,
    provider_client,
)
from tests.fixtures.fake_influx2 import FakeInflux2
from tests.fixtures.fake_ksqldb import FakeKsqlDB
from tests.fixtures.influx import InfluxServer, start_influxd
from tests.fixtures.prometheus import PrometheusServer
from tests.util import free_port

UNKNOWN = ReasonCode.UNKNOWN_METRIC
UNREACHABLE = ReasonCode.UNREACHABLE_METRICS_PROVIDER


def code(value: float | MetricError) -> ReasonCode | None:
    return value.code if isinstance(value, MetricError) else None


def counting_client() -> tuple[aiohttp.ClientSession, list[yarl.URL]]:
    """A session that notes the URL of every request it sends."""
    sent: list[yarl.URL] = []

    async def noted(session: object, context: object, params: aiohttp.TraceRequestStartParams
                    ) -> None:
        sent.append(params.url)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(noted)
    return aiohttp.ClientSession(trace_configs=[trace]), sent


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def answering(handler: Handler) -> AsyncIterator[str]:
    """A provider that answers every request with ``handler``: its URL."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def kafka_spec(url: str, table: str = "metrics") -> KafkaSpec:
    return KafkaSpec(url=url, table=table, comparison_column="name", value_column="val")


def influx2_spec(url: str, token: str = "secret-token", bucket: str = "metrics") -> InfluxSpec:
    return InfluxSpec(url=url, org="shoal", bucket=bucket, token=token)


# ---------------------------------------------------------------- factory and static


async def test_provider_client_picks_the_client_of_the_type(session: aiohttp.ClientSession) -> None:
    specs = {
        PrometheusClient: MetricsProviderSpec(
            type="prometheus", prometheus=PrometheusSpec(url="http://p")
        ),
        InfluxV1Client: MetricsProviderSpec(
            type="influx", influx=InfluxSpec(url="http://i", version=1, database="db")
        ),
        InfluxV2Client: MetricsProviderSpec(type="influx", influx=influx2_spec("http://i")),
        KafkaClient: MetricsProviderSpec(type="kafka", kafka=kafka_spec("http://k")),
        StaticClient: MetricsProviderSpec(type="static", static=StaticSpec(metrics={"a": 1})),
    }
    for cls, spec in specs.items():
        client = provider_client(spec, timeout=1, http=session)
        assert isinstance(client, cls)
        assert isinstance(client, MetricsProviderClient)
        await client.close()


async def test_static_values_and_unknown() -> None:
    client = StaticClient(StaticSpec(metrics={"a": 0.5, "b": 2}))
    result = await client.fetch(["a", "b", "c"])
    assert result["a"] == 0.5 and result["b"] == 2
    assert code(result["c"]) == UNKNOWN


# ---------------------------------------------------------------- Prometheus


def test_prometheus_batch_query_selects_every_name() -> None:
    assert prometheus_batch_query(["a", "b:c"]) == '{__name__=~"a|b:c"}'


@pytest.mark.integration
async def test_prometheus_plain_metrics_in_one_request(prometheus: PrometheusServer) -> None:
    session, sent = counting_client()
    async with session:
        client = PrometheusClient(PrometheusSpec(url=prometheus.url), timeout=5, http=session)
        result = await client.fetch(["shoal_load", "shoal_cost", "shoal_zero", "shoal_missing"])
    assert result["shoal_load"] == 0.25
    assert result["shoal_cost"] == 3.0
    assert result["shoal_zero"] == 0.0
    assert code(result["shoal_missing"]) == UNKNOWN
    assert len(sent) == 1 and client.requests == 1
    assert sent[0].path == "/api/v1/query"


async def test_prometheus_url_without_scheme_is_an_unreachable_provider() -> None:
    """Krake's way to name an unreachable provider (``1.2.3.4:9090``): every metric asked
    is UNREACHABLE_METRICS_PROVIDER, and nothing is sent."""
    session, sent = counting_client()
    async with session:
        client = PrometheusClient(PrometheusSpec(url="1.2.3.4:9090"), timeout=5, http=session)
        result = await client.fetch(["heat_demand_zone_unreachable", "other"])
    assert {name: code(value) for name, value in result.items()} == {
        "heat_demand_zone_unreachable": UNREACHABLE, "other": UNREACHABLE}
    assert sent == []


@pytest.mark.integration
async def test_prometheus_batches_are_chunked(
    prometheus: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thousands of names are fetched in chunks (sent concurrently), never one query each.
    monkeypatch.setattr("shoal.scheduler.metrics.providers.prometheus.PROMETHEUS_BATCH", 2)
    session, sent = counting_client()
    async with session:
        client = PrometheusClient(PrometheusSpec(url=prometheus.url), timeout=5, http=session)
        result = await client.fetch(["shoal_load", "shoal_cost", "shoal_zero", "shoal_heat"])
    assert result == {"shoal_load": 0.25, "shoal_cost": 3.0, "shoal_zero": 0.0, "shoal_heat": 7.5}
    assert len(sent) == 2 and client.requests == 2


@pytest.mark.integration
async def test_prometheus_expressions_vector_and_scalar(
    prometheus: PrometheusServer, session: aiohttp.ClientSession
) -> None:
    client = PrometheusClient(PrometheusSpec(url=prometheus.url), timeout=5, http=session)
    exprs = [
        "shoal_load",
        "sum(shoal_cost) * 2",
        "scalar(shoal_heat)",
        "sum(shoal_nothing)",
        "shoal_load[5m]",
        "sum((",
    ]
    result = await client.fetch(exprs)
    assert result["shoal_load"] == 0.25
    assert result["sum(shoal_cost) * 2"] == 6.0
    assert result["scalar(shoal_heat)"] == 7.5
    assert code(result["sum(shoal_nothing)"]) == UNKNOWN  # empty vector
    assert code(result["shoal_load[5m]"]) == UNKNOWN  # a range vector is not a sample
    assert code(result["sum(("]) == UNKNOWN  # refused by Prometheus
    assert client.requests == 1 + 5  # plain names batched, the rest one each


async def test_prometheus_down_is_unreachable(session: aiohttp.ClientSession) -> None:
    client = PrometheusClient(
        PrometheusSpec(url=f"http://127.0.0.1:{free_port()}"), timeout=2, http=session
    )
    result = await client.fetch(["a", "sum(b)"])
    assert {code(v) for v in result.values()} == {UNREACHABLE}


async def test_prometheus_5xx_and_garbage_are_unreachable() -> None:
    answers = iter(
        [
            web.Response(status=503, text="overloaded"),
            web.Response(text="<html>not json</html>"),
            web.json_response({"status": "success", "data": {"resultType": "matrix"}}),
        ]
    )

    async def handler(request: web.Request) -> web.Response:
        return next(answers)

    async with answering(handler) as url, aiohttp.ClientSession() as session:
        client = PrometheusClient(PrometheusSpec(url=url), timeout=2, http=session)
        for _ in range(3):
            result = await client.fetch(["a", "b"])
            assert {code(v) for v in result.values()} == {UNREACHABLE}, result


async def test_prometheus_timeout() -> None:
    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        raise AssertionError("not reached")

    async with answering(handler) as url, aiohttp.ClientSession() as session:
        client = PrometheusClient(PrometheusSpec(url=url), timeout=0.2, http=session)
        started = asyncio.get_running_loop().time()
        result = await client.fetch(["a"])
        took = asyncio.get_running_loop().time() - started
    assert took < 2  # the provider still sleeps: the fetch gave up at its timeout
    assert isinstance(result["a"], MetricError) and result["a"].code == UNREACHABLE
    assert "timed out" in result["a"].message


# ---------------------------------------------------------------- InfluxDB 1.x


@pytest.mark.integration
async def test_influx1_last_values_in_one_request(influxd: InfluxServer) -> None:
    influxd.write("load value=0.1 1000000000", "load value=0.4", "cost value=12", "other x=1")
    session, sent = counting_client()
    async with session:
        spec = InfluxSpec(url=influxd.url, version=1, database=influxd.database)
        client = InfluxV1Client(spec, timeout=5, http=session)
        result = await client.fetch(["load", "cost", "other", "missing"])
    assert result["load"] == 0.4
    assert result["cost"] == 12
    assert code(result["other"]) == UNKNOWN  # no field "value"
    assert code(result["missing"]) == UNKNOWN
    assert len(sent) == 1
    assert sent[0].query["q"] == (
        'SELECT last(value) FROM "load"; SELECT last(value) FROM "cost"; '
        'SELECT last(value) FROM "other"; SELECT last(value) FROM "missing"'
    )


@pytest.mark.integration
async def test_influx1_unknown_database_and_stopped_server(session: aiohttp.ClientSession) -> None:
    with start_influxd("shoal") as server:
        server.write("load value=1")
        spec = InfluxSpec(url=server.url, version=1, database="shoal")
        client = InfluxV1Client(spec, timeout=5, http=session)
        assert (await client.fetch(["load"]))["load"] == 1
        wrong = InfluxV1Client(
            spec.model_copy(update={"database": "nope"}), timeout=5, http=session
        )
        assert code((await wrong.fetch(["load"]))["load"]) == UNREACHABLE
        server.stop()
        assert code((await client.fetch(["load"]))["load"]) == UNREACHABLE


async def test_influx1_sends_credentials() -> None:
    seen: list[web.Request] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request)
        return web.json_response(
            {
                "results": [
                    {
                        "statement_id": 0,
                        "series": [{"name": "m", "columns": ["time", "last"], "values": [[1, 2]]}],
                    }
                ]
            },
        )

    async with answering(handler) as url, aiohttp.ClientSession() as session:
        spec = InfluxSpec(url=url, version=1, database="d", username="u", password="p")
        result = await InfluxV1Client(spec, timeout=1, http=session).fetch(["m"])
    assert result == {"m": 2.0}
    assert seen[0].query["u"] == "u" and seen[0].query["p"] == "p"
    assert seen[0].query["db"] == "d"


# ---------------------------------------------------------------- InfluxDB 2 (fake)


def test_flux_query_is_documented_shape() -> None:
    assert flux_query("b", ["m1", 'q"x']) == (
        'from(bucket: "b")\n'
        "  |> range(start: -1h)\n"
        '  |> filter(fn: (r) => r._measurement == "m1" or r._measurement == "q\\"x")\n'
        "  |> last()"
    )


def test_annotated_csv_error_table_raises() -> None:
    text = "#datatype,string,string\r\n#group,true,true\r\n#default,,\r\n,error,reference\r\n"
    text += ",boom,\r\n"
    with pytest.raises(Exception, match="boom"):
        parse_annotated_csv(text)


async def test_influx2_last_values(fake_influx2: FakeInflux2) -> None:
    now = datetime.now(UTC)
    fake_influx2.write("load", 0.9, time=now - timedelta(minutes=10))
    fake_influx2.write("load", 0.3, time=now - timedelta(seconds=1))
    fake_influx2.write("load", 55, field_name="other", time=now)  # field "value" wins
    fake_influx2.write("cost", 4, field_name="eur", tags={"zone": "a"})
    fake_influx2.write("stale", 1, time=now - timedelta(hours=3))  # outside the range
    client = InfluxV2Client(influx2_spec(fake_influx2.url), timeout=5)
    try:
        result = await client.fetch(["load", "cost", "stale", "missing"])
    finally:
        await client.close()
    assert result["load"] == 0.3
    assert result["cost"] == 4
    assert code(result["stale"]) == UNKNOWN
    assert code(result["missing"]) == UNKNOWN
    assert fake_influx2.queries == [flux_query("metrics", ["load", "cost", "stale", "missing"])]


async def test_influx2_errors_are_unreachable(fake_influx2: FakeInflux2) -> None:
    fake_influx2.write("load", 1)
    for spec in (
        influx2_spec(fake_influx2.url, token="wrong"),
        influx2_spec(fake_influx2.url, bucket="nope"),
        influx2_spec(f"http://127.0.0.1:{free_port()}"),
    ):
        client = InfluxV2Client(spec, timeout=5)
        try:
            result = await client.fetch(["load"])
        finally:
            await client.close()
        assert code(result["load"]) == UNREACHABLE, (spec, result)
    fake_influx2.fail_status = 503
    client = InfluxV2Client(influx2_spec(fake_influx2.url), timeout=0.3)
    try:
        assert code((await client.fetch(["load"]))["load"]) == UNREACHABLE
        fake_influx2.fail_status = None
        fake_influx2.delay = 0.8
        result = await client.fetch(["load"])
        assert isinstance(result["load"], MetricError) and "timed out" in result["load"].message
    finally:
        await client.close()


async def test_influx2_fake_serves_ping_and_health(fake_influx2: FakeInflux2) -> None:
    async with httpx.AsyncClient() as session:
        assert (await session.get(f"{fake_influx2.url}/ping")).status_code == 204
        assert (await session.get(f"{fake_influx2.url}/health")).json()["status"] == "pass"


# ---------------------------------------------------------------- ksqlDB (fake)


def test_ksql_queries() -> None:
    spec = kafka_spec("http://k")
    assert ksql_query(spec, ["a"]) == "SELECT val FROM metrics WHERE name = 'a';"
    assert ksql_query(spec, ["a", "it's"]) == (
        "SELECT name, val FROM metrics WHERE name IN ('a', 'it''s');"
    )


async def test_kafka_batches_with_in(
    fake_ksqldb: FakeKsqlDB, session: aiohttp.ClientSession
) -> None:
    fake_ksqldb.tables["METRICS"].rows.update({"load": 0.5, "cost": 3, "null": None})
    client = KafkaClient(kafka_spec(fake_ksqldb.url), timeout=5, http=session)
    result = await client.fetch(["load", "cost", "null", "missing"])
    assert result["load"] == 0.5 and result["cost"] == 3
    assert code(result["null"]) == UNKNOWN and code(result["missing"]) == UNKNOWN
    assert len(fake_ksqldb.queries) == 1 and " IN (" in fake_ksqldb.queries[0]
    single = await client.fetch(["load"])
    assert single == {"load": 0.5}
    assert fake_ksqldb.queries[-1] == "SELECT val FROM metrics WHERE name = 'load';"


async def test_kafka_falls_back_to_one_query_per_metric(
    fake_ksqldb: FakeKsqlDB, session: aiohttp.ClientSession
) -> None:
    fake_ksqldb.support_in = False
    fake_ksqldb.final_message = True
    fake_ksqldb.tables["METRICS"].rows.update({"load": 0.5, "cost": 3})
    client = KafkaClient(kafka_spec(fake_ksqldb.url), timeout=5, http=session)
    result = await client.fetch(["load", "cost", "missing"])
    assert result == {"load": 0.5, "cost": 3, "missing": result["missing"]}
    assert code(result["missing"]) == UNKNOWN
    assert len(fake_ksqldb.queries) == 1 + 3
    assert client.batch is False  # remembered: the next fetch does not try IN
    await client.fetch(["load", "cost"])
    assert len(fake_ksqldb.queries) == 4 + 2


async def test_kafka_errors(fake_ksqldb: FakeKsqlDB, session: aiohttp.ClientSession) -> None:
    fake_ksqldb.tables["METRICS"].rows["load"] = 1
    wrong_table = KafkaClient(kafka_spec(fake_ksqldb.url, table="nope"), timeout=5, http=session)
    result = await wrong_table.fetch(["load", "x"])
    assert {code(v) for v in result.values()} == {UNREACHABLE}
    assert "does not exist" in str(result["load"])
    assert wrong_table.batch is True  # a misconfigured table does not disable IN
    down = KafkaClient(kafka_spec(f"http://127.0.0.1:{free_port()}"), timeout=5, http=session)
    assert code((await down.fetch(["load"]))["load"]) == UNREACHABLE
    client = KafkaClient(kafka_spec(fake_ksqldb.url), timeout=0.3, http=session)
    fake_ksqldb.fail_status = 503
    assert code((await client.fetch(["load"]))["load"]) == UNREACHABLE
    fake_ksqldb.fail_status = None
    fake_ksqldb.delay = 0.8
    result = await client.fetch(["load"])
    assert isinstance(result["load"], MetricError) and "timed out" in result["load"].message


async def test_kafka_fake_speaks_the_documented_format(fake_ksqldb: FakeKsqlDB) -> None:
    fake_ksqldb.tables["METRICS"].rows["load"] = 0.5
    headers = {"Content-Type": "application/vnd.ksql.v1+json"}
    body = {"ksql": "SELECT val FROM metrics WHERE name = 'load';", "streamsProperties": {}}
    async with httpx.AsyncClient() as session:
        response = await session.post(
            f"{fake_ksqldb.url}/query", content=json.dumps(body), headers=headers
        )
        assert response.status_code == 200
        header, row = response.json()
        assert header["header"]["schema"] == "`VAL` DOUBLE" and "queryId" in header["header"]
        assert row == {"row": {"columns": [0.5]}}
        body["ksql"] = "SELECT val FROM nope WHERE name = 'load';"
        response = await session.post(
            f"{fake_ksqldb.url}/query", content=json.dumps(body), headers=headers
        )
        assert response.status_code == 400
        error = response.json()
        assert error["@type"] == "statement_error" and error["error_code"] == 40001


async def test_kafka_error_message_element_is_unreachable() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(
            [
                {"header": {"queryId": "q", "schema": "`VAL` DOUBLE"}},
                {"errorMessage": {"@type": "generic_error", "error_code": 50000, "message": "x"}},
            ],
        )

    async with answering(handler) as url, aiohttp.ClientSession() as session:
        client = KafkaClient(kafka_spec(url), timeout=1, http=session)
        assert code((await client.fetch(["load"]))["load"]) == UNREACHABLE
