"""Clients of the metrics providers (Prometheus, InfluxDB 1.x/2, ksqlDB, static).

Every client answers one ``fetch`` for a whole batch of metrics, so that the
metric cache costs each provider one round trip per refresh, and never
raises: a provider that is down yields an ``UNREACHABLE_METRICS_PROVIDER``
error for every metric asked, a metric the provider does not have an
``UNKNOWN_METRIC`` error for that metric alone.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import httpx

from shoal.model.base import ReasonCode
from shoal.model.core import InfluxSpec, KafkaSpec, MetricsProviderSpec, PrometheusSpec, StaticSpec

__all__ = [
    "INFLUX_RANGE",
    "InfluxV1Client",
    "InfluxV2Client",
    "KafkaClient",
    "MetricError",
    "MetricsProviderClient",
    "PrometheusClient",
    "StaticClient",
    "flux_query",
    "influxql_query",
    "ksql_query",
    "parse_annotated_csv",
    "prometheus_batch_query",
    "provider_client",
]

#: How far back the InfluxDB queries look for the last value of a measurement.
INFLUX_RANGE = "-1h"

_PLAIN_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
#: Label added by the batched Prometheus query to tell the metrics apart.


@dataclass(frozen=True, slots=True)
class MetricError:
    """Why a metric has no usable value (a ``Reason`` in the making)."""

    code: ReasonCode
    message: str


@runtime_checkable
class MetricsProviderClient(Protocol):
    """Fetches the current values of metrics from one provider."""

    #: HTTP requests (or, for static providers, lookups) made so far.
    requests: int

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        """Value or error of every metric (name inside the provider) asked for."""
        ...

    async def close(self) -> None: ...


def provider_client(
    spec: MetricsProviderSpec, *, timeout: float, http: httpx.AsyncClient
) -> MetricsProviderClient:
    """The client for ``spec``; HTTP clients share ``http`` and never close it."""
    if spec.type == "prometheus":
        assert spec.prometheus is not None
        return PrometheusClient(spec.prometheus, timeout=timeout, http=http)
    if spec.type == "influx":
        assert spec.influx is not None
        if spec.influx.version == 1:
            return InfluxV1Client(spec.influx, timeout=timeout, http=http)
        return InfluxV2Client(spec.influx, timeout=timeout)
    if spec.type == "kafka":
        assert spec.kafka is not None
        return KafkaClient(spec.kafka, timeout=timeout, http=http)
    assert spec.static is not None
    return StaticClient(spec.static)


def _unreachable(metrics: Sequence[str], message: str) -> dict[str, float | MetricError]:
    error = MetricError(ReasonCode.UNREACHABLE_METRICS_PROVIDER, message)
    return dict.fromkeys(metrics, error)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timed out"
    text = str(exc)
    if isinstance(exc, _ProviderDown):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _guarded(
    name: str,
    url: str,
    metrics: Sequence[str],
    timeout: float,
    call: Callable[[], Awaitable[dict[str, float | MetricError]]],
    errors: tuple[type[BaseException], ...] = (),
) -> dict[str, float | MetricError]:
    """Run ``call`` under the timeout; map transport failures to UNREACHABLE."""
    if not metrics:
        return {}
    caught: tuple[type[BaseException], ...] = (
        TimeoutError,
        httpx.HTTPError,
        ValueError,
        KeyError,
        TypeError,
        *errors,
    )
    try:
        async with asyncio.timeout(timeout):
            return await call()
    except caught as exc:
        return _unreachable(metrics, f"{name} provider at {url}: {_describe(exc)}")


class _ProviderDown(Exception):
    """A response that says the provider (not one metric) is unusable."""


def _check_status(response: httpx.Response, what: str) -> None:
    if response.status_code >= 500 or response.status_code in (401, 403, 404, 407):
        raise _ProviderDown(f"{what} answered HTTP {response.status_code}: {response.text[:200]}")


def _as_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return float(value)  # Prometheus sends "NaN", "+Inf" and decimals as strings
    raise ValueError(f"not a number: {value!r}")


# --------------------------------------------------------------------------- Prometheus


PROMETHEUS_BATCH = 500


def prometheus_batch_query(metrics: Sequence[str]) -> str:
    """One PromQL selector returning every plain metric, each series carrying its name.

    A ``__name__`` regex is answered from Prometheus' index in one pass; a chain
    of ``or`` terms is matched pairwise and did not finish within 30 s for
    3,000 metrics. Plain metric names hold no regex characters but ``:``.
    """
    return '{__name__=~"' + "|".join(metrics) + '"}'


class PrometheusClient:
    """Instant queries on ``/api/v1/query``: one request for all plain metric
    names, one more per other PromQL expression (sent concurrently)."""

    def __init__(self, spec: PrometheusSpec, *, timeout: float, http: httpx.AsyncClient) -> None:
        self.url = spec.url.rstrip("/")
        self.timeout = timeout
        self.http = http
        self.requests = 0

    async def _query(self, query: str) -> tuple[str, Any] | MetricError:
        """``(resultType, result)``, or the error a 4xx query error means."""
        self.requests += 1
        response = await self.http.post(
            f"{self.url}/api/v1/query", data={"query": query}, timeout=self.timeout
        )
        _check_status(response, "Prometheus")
        body = response.json()
        if body.get("status") != "success":
            if response.status_code in (400, 422) and body.get("errorType") in (
                "bad_data",
                "execution",
            ):
                return MetricError(
                    ReasonCode.UNKNOWN_METRIC, f"Prometheus rejected {query!r}: {body.get('error')}"
                )
            raise _ProviderDown(f"Prometheus answered {response.status_code}: {body!r}"[:300])
        data = body["data"]
        return str(data["resultType"]), data["result"]

    async def _batch(self, names: list[str]) -> dict[str, float | MetricError]:
        result = await self._query(prometheus_batch_query(names))
        if isinstance(result, MetricError):
            return dict.fromkeys(names, result)
        kind, samples = result
        if kind != "vector":
            raise _ProviderDown(f"batched query returned a {kind}, not a vector")
        out: dict[str, float | MetricError] = {}
        for sample in samples:
            name = sample["metric"].get("__name__")
            if name in names and name not in out:
                out[name] = _as_float(sample["value"][1])
        for name in names:
            out.setdefault(name, _no_sample(name))
        return out

    async def _single(self, expr: str) -> float | MetricError:
        result = await self._query(expr)
        if isinstance(result, MetricError):
            return result
        kind, data = result
        if kind == "scalar":
            return _as_float(data[1])
        if kind == "vector":
            return _as_float(data[0]["value"][1]) if data else _no_sample(expr)
        return MetricError(
            ReasonCode.UNKNOWN_METRIC, f"Prometheus query {expr!r} returned a {kind}, not a sample"
        )

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        wanted = list(dict.fromkeys(metrics))

        async def call() -> dict[str, float | MetricError]:
            plain = [m for m in wanted if _PLAIN_METRIC.match(m)]
            other = [m for m in wanted if not _PLAIN_METRIC.match(m)]
            chunks = [
                plain[i : i + PROMETHEUS_BATCH] for i in range(0, len(plain), PROMETHEUS_BATCH)
            ]
            batches = await asyncio.gather(*(self._batch(chunk) for chunk in chunks))
            singles = await asyncio.gather(*(self._single(m) for m in other))
            out: dict[str, float | MetricError] = {}
            for batch in batches:
                out.update(batch)
            out.update(zip(other, singles, strict=True))
            return out

        return await _guarded(
            "Prometheus", self.url, wanted, self.timeout, call, (_ProviderDown, IndexError)
        )

    async def close(self) -> None:
        return None


def _no_sample(metric: str) -> MetricError:
    return MetricError(ReasonCode.UNKNOWN_METRIC, f"no sample of {metric!r} on the provider")


# --------------------------------------------------------------------------- InfluxDB


def _influxql_ident(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def influxql_query(metrics: Sequence[str]) -> str:
    """One InfluxQL statement per metric, all sent in one request."""
    return "; ".join(f"SELECT last(value) FROM {_influxql_ident(m)}" for m in metrics)


class InfluxV1Client:
    """InfluxDB 1.x: ``GET /query?db=...&q=SELECT last(value) FROM "m1"; ...``.

    A metric is the measurement's field ``value``; its last point counts.
    """

    def __init__(self, spec: InfluxSpec, *, timeout: float, http: httpx.AsyncClient) -> None:
        self.url = spec.url.rstrip("/")
        self.database = spec.database or ""
        self.username = spec.username
        self.password = spec.password
        self.timeout = timeout
        self.http = http
        self.requests = 0

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        wanted = list(dict.fromkeys(metrics))

        async def call() -> dict[str, float | MetricError]:
            params = {"db": self.database, "q": influxql_query(wanted), "epoch": "s"}
            if self.username is not None:
                params["u"] = self.username
                params["p"] = self.password or ""
            self.requests += 1
            response = await self.http.get(f"{self.url}/query", params=params, timeout=self.timeout)
            _check_status(response, "InfluxDB")
            body = response.json()
            if response.status_code != 200 or "error" in body:
                raise _ProviderDown(f"InfluxDB answered {response.status_code}: {body!r}"[:300])
            results = body["results"]
            out: dict[str, float | MetricError] = {}
            for i, name in enumerate(wanted):
                statement: dict[str, Any] = next(
                    (r for r in results if r.get("statement_id") == i), {}
                )
                if "error" in statement:
                    error = str(statement["error"])
                    if "database not found" in error:
                        raise _ProviderDown(error)
                    out[name] = MetricError(ReasonCode.UNKNOWN_METRIC, f"InfluxDB: {error}")
                    continue
                series = statement.get("series") or []
                values = series[0].get("values") if series else None
                if not values or values[0][1] is None:
                    out[name] = _no_sample(name)
                else:
                    out[name] = _as_float(values[0][1])
            return out

        return await _guarded("InfluxDB", self.url, wanted, self.timeout, call, (_ProviderDown,))

    async def close(self) -> None:
        return None


_FRACTION = re.compile(r"\.(\d{1,9})")


def _parse_time(value: str) -> datetime:
    """An RFC 3339 time as Flux writes it (up to nanoseconds, ``Z``)."""
    value = _FRACTION.sub(lambda m: "." + m[1][:6].ljust(6, "0"), value.replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def parse_annotated_csv(text: str) -> list[dict[str, str]]:
    """The records of a Flux annotated-CSV response, as column -> cell text.

    Annotation rows start with ``#``; each table's first other row is its
    header; an empty line separates tables of different schemas. A Flux
    error arrives as a table with an ``error`` column.
    """
    records: list[dict[str, str]] = []
    header: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        if not row or all(cell == "" for cell in row):
            header = None
            continue
        if row[0].startswith("#"):
            header = None
            continue
        if header is None:
            header = row
            continue
        record = dict(zip(header, row, strict=False))
        if "error" in header and record.get("error"):
            raise _ProviderDown(f"Flux error: {record['error']}")
        records.append(record)
    return records


def _flux_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${") + '"'


def flux_query(bucket: str, metrics: Sequence[str]) -> str:
    """The Flux query for the last value of each measurement named in ``metrics``."""
    condition = " or ".join(f"r._measurement == {_flux_string(m)}" for m in metrics)
    return (
        f"from(bucket: {_flux_string(bucket)})\n"
        f"  |> range(start: {INFLUX_RANGE})\n"
        f"  |> filter(fn: (r) => {condition})\n"
        f"  |> last()"
    )


class InfluxV2Client:
    """InfluxDB 2: one Flux query (see ``flux_query``) through influxdb-client's async API.

    ``last()`` answers one record per series; of a measurement's series, the
    one of field ``value`` wins, otherwise the most recent.
    """

    def __init__(self, spec: InfluxSpec, *, timeout: float) -> None:
        self.url = spec.url.rstrip("/")
        self.token = spec.token or ""
        self.org = spec.org or ""
        self.bucket = spec.bucket or ""
        self.timeout = timeout
        self.requests = 0
        self._client: Any = None

    def _api(self) -> Any:
        if self._client is None:
            from influxdb_client.client.influxdb_client_async import InfluxDBClientAsync

            self._client = InfluxDBClientAsync(
                url=self.url,
                token=self.token,
                org=self.org,
                timeout=int(self.timeout * 1000),
                enable_gzip=False,
            )
        return self._client.query_api()

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        import aiohttp
        from influxdb_client.rest import ApiException

        wanted = list(dict.fromkeys(metrics))

        async def call() -> dict[str, float | MetricError]:
            self.requests += 1
            try:
                text = await self._api().query_raw(flux_query(self.bucket, wanted), org=self.org)
            except ApiException as exc:
                body = (
                    exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body
                )
                raise _ProviderDown(f"HTTP {exc.status}: {body or exc.reason}") from exc
            best: dict[str, tuple[bool, datetime, float]] = {}
            for record in parse_annotated_csv(text):
                name = record.get("_measurement")
                if name not in wanted:
                    continue
                key = (record.get("_field") == "value", _parse_time(record.get("_time", "")))
                if name not in best or key > best[name][:2]:
                    best[name] = (*key, _as_float(record.get("_value")))
            return {name: best[name][2] if name in best else _no_sample(name) for name in wanted}

        return await _guarded(
            "InfluxDB",
            self.url,
            wanted,
            self.timeout,
            call,
            (_ProviderDown, aiohttp.ClientError, OSError),
        )

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


# --------------------------------------------------------------------------- ksqlDB

KSQL_CONTENT_TYPE = "application/vnd.ksql.v1+json"


def _ksql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def ksql_query(spec: KafkaSpec, metrics: Sequence[str]) -> str:
    """The pull query for ``metrics``: ``=`` for one, ``IN (...)`` for several."""
    if len(metrics) == 1:
        return (
            f"SELECT {spec.value_column} FROM {spec.table} "
            f"WHERE {spec.comparison_column} = {_ksql_string(metrics[0])};"
        )
    names = ", ".join(_ksql_string(m) for m in metrics)
    return (
        f"SELECT {spec.comparison_column}, {spec.value_column} FROM {spec.table} "
        f"WHERE {spec.comparison_column} IN ({names});"
    )


class _KsqlStatementError(_ProviderDown):
    """ksqlDB refused the statement (HTTP 400 with an error document).

    Metric names are quoted literals, so a refused statement means the
    provider's table or columns are wrong: the provider is unusable.
    """


class KafkaClient:
    """ksqlDB pull queries on the REST ``/query`` endpoint.

    Several metrics go in one ``IN (...)`` query; a server that refuses it
    (ksqlDB before 0.22) is asked once per metric with ``=``, and remembered.
    """

    def __init__(self, spec: KafkaSpec, *, timeout: float, http: httpx.AsyncClient) -> None:
        self.spec = spec
        self.url = spec.url.rstrip("/")
        self.timeout = timeout
        self.http = http
        self.requests = 0
        self.batch = True

    async def _query(self, ksql: str) -> list[list[Any]]:
        """The rows' columns; raises ``_KsqlStatementError`` on a refused statement."""
        self.requests += 1
        response = await self.http.post(
            f"{self.url}/query",
            content=json.dumps({"ksql": ksql, "streamsProperties": {}}),
            headers={"Content-Type": KSQL_CONTENT_TYPE, "Accept": KSQL_CONTENT_TYPE},
            timeout=self.timeout,
        )
        _check_status(response, "ksqlDB")
        body = response.json()
        if response.status_code != 200:
            if isinstance(body, dict) and "@type" in body:
                raise _KsqlStatementError(f"{body.get('error_code')}: {body.get('message')}")
            raise _ProviderDown(f"ksqlDB answered {response.status_code}: {body!r}"[:300])
        if isinstance(body, dict):  # some versions answer a lone object
            body = [body]
        rows: list[list[Any]] = []
        for element in body:
            if "row" in element:
                columns = element["row"].get("columns")
                if columns is not None:
                    rows.append(columns)
            elif "errorMessage" in element:
                error = element["errorMessage"]
                message = error.get("message") if isinstance(error, dict) else error
                raise _KsqlStatementError(str(message))
        return rows

    async def _one(self, name: str) -> float | MetricError:
        rows = await self._query(ksql_query(self.spec, [name]))
        if not rows or not rows[-1] or rows[-1][0] is None:
            return _no_sample(name)
        return _as_float(rows[-1][0])

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        wanted = list(dict.fromkeys(metrics))

        async def call() -> dict[str, float | MetricError]:
            refused = False
            if len(wanted) > 1 and self.batch:
                try:
                    rows = await self._query(ksql_query(self.spec, wanted))
                except _KsqlStatementError:
                    refused = True
                else:
                    out: dict[str, float | MetricError] = {}
                    for row in rows:
                        if len(row) >= 2 and row[0] in wanted and row[1] is not None:
                            out[row[0]] = _as_float(row[1])
                    for name in wanted:
                        out.setdefault(name, _no_sample(name))
                    return out
            values = await asyncio.gather(*(self._one(m) for m in wanted))
            if refused:  # ``=`` works where ``IN`` did not: an older ksqlDB
                self.batch = False
            return dict(zip(wanted, values, strict=True))

        return await _guarded(
            "ksqlDB", self.url, wanted, self.timeout, call, (_ProviderDown, IndexError)
        )

    async def close(self) -> None:
        return None


# --------------------------------------------------------------------------- static


class StaticClient:
    """Values written in the provider's spec."""

    def __init__(self, spec: StaticSpec) -> None:
        self.values = dict(spec.metrics)
        self.requests = 0

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        self.requests += 1
        out: dict[str, float | MetricError] = {}
        for name in metrics:
            value = self.values.get(name)
            out[name] = _no_sample(name) if value is None or math.isnan(value) else value
        return out

    async def close(self) -> None:
        return None
