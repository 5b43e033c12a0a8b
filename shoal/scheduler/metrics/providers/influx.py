"""InfluxDB: 1.x through InfluxQL on ``/query``, 2 through Flux with influxdb-client."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import aiohttp

from shoal.machinery import outbound
from shoal.model.base import ReasonCode
from shoal.model.core import InfluxSpec
from shoal.scheduler.metrics.providers.base import (
    MetricError,
    ProviderDown,
    as_float,
    check_status,
    guarded,
    no_sample,
    send,
)

#: How far back the InfluxDB queries look for the last value of a measurement.
INFLUX_RANGE = "-1h"


def _influxql_ident(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def influxql_query(metrics: Sequence[str]) -> str:
    """One InfluxQL statement per metric, all sent in one request."""
    return "; ".join(f"SELECT last(value) FROM {_influxql_ident(m)}" for m in metrics)


class InfluxV1Client:
    """InfluxDB 1.x: ``GET /query?db=...&q=SELECT last(value) FROM "m1"; ...``.

    A metric is the measurement's field ``value``; its last point counts.
    """

    def __init__(
        self, spec: InfluxSpec, *, timeout: float, http: aiohttp.ClientSession
    ) -> None:
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
            response = await send(
                self.http, "GET", f"{self.url}/query", params=params, timeout=self.timeout
            )
            check_status(response, "InfluxDB")
            body = response.json()
            if response.status_code != 200 or "error" in body:
                raise ProviderDown(f"InfluxDB answered {response.status_code}: {body!r}"[:300])
            results = body["results"]
            out: dict[str, float | MetricError] = {}
            for i, name in enumerate(wanted):
                statement: dict[str, Any] = next(
                    (r for r in results if r.get("statement_id") == i), {}
                )
                if "error" in statement:
                    error = str(statement["error"])
                    if "database not found" in error:
                        raise ProviderDown(error)
                    out[name] = MetricError(ReasonCode.UNKNOWN_METRIC, f"InfluxDB: {error}")
                    continue
                series = statement.get("series") or []
                values = series[0].get("values") if series else None
                if not values or values[0][1] is None:
                    out[name] = no_sample(name)
                else:
                    out[name] = as_float(values[0][1])
            return out

        return await guarded("InfluxDB", self.url, wanted, self.timeout, call, (ProviderDown,))

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
            raise ProviderDown(f"Flux error: {record['error']}")
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


def _checked_session(*, connector: aiohttp.TCPConnector, **options: Any) -> aiohttp.ClientSession:
    """influxdb-client's session, its connections under the outbound policy (in place of the
    connector it made, which never connects)."""
    return aiohttp.ClientSession(connector=outbound.connector(limit=connector.limit), **options)


class InfluxV2Client:
    """InfluxDB 2: one Flux query (see ``flux_query``) through influxdb-client's async API.

    ``last()`` answers one record per series; of a measurement's series, the
    one of field ``value`` wins, otherwise the most recent.
    """

    def __init__(self, spec: InfluxSpec, *, timeout: float, tenant: bool = False) -> None:
        self.url = spec.url.rstrip("/")
        self.tenant = tenant  # its URL is a tenant's: connections under the outbound policy
        self.token = spec.token or ""
        self.org = spec.org or ""
        self.bucket = spec.bucket or ""
        self.timeout = timeout
        self.requests = 0
        self._client: Any = None

    def _api(self) -> Any:
        if self._client is None:
            from influxdb_client.client.influxdb_client_async import InfluxDBClientAsync

            options: dict[str, Any] = {}
            if self.tenant:
                options["client_session_type"] = _checked_session
            self._client = InfluxDBClientAsync(
                url=self.url,
                token=self.token,
                org=self.org,
                timeout=int(self.timeout * 1000),
                enable_gzip=False,
                **options,
            )
        return self._client.query_api()

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
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
                raise ProviderDown(f"HTTP {exc.status}: {body or exc.reason}") from exc
            best: dict[str, tuple[bool, datetime, float]] = {}
            for record in parse_annotated_csv(text):
                name = record.get("_measurement")
                if name not in wanted:
                    continue
                key = (record.get("_field") == "value", _parse_time(record.get("_time", "")))
                if name not in best or key > best[name][:2]:
                    best[name] = (*key, as_float(record.get("_value")))
            return {name: best[name][2] if name in best else no_sample(name) for name in wanted}

        return await guarded(
            "InfluxDB",
            self.url,
            wanted,
            self.timeout,
            call,
            (ProviderDown, aiohttp.ClientError, OSError),
        )

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
