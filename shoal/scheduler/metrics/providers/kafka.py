"""Kafka through ksqlDB: pull queries on its REST ``/query`` endpoint."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import aiohttp

from shoal.model.core import KafkaSpec
from shoal.scheduler.metrics.providers.base import (
    MetricError,
    ProviderDown,
    as_float,
    check_status,
    guarded,
    no_sample,
    send,
)

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


class KsqlStatementError(ProviderDown):
    """ksqlDB refused the statement (HTTP 400 with an error document).

    Metric names are quoted literals, so a refused statement means the
    provider's table or columns are wrong: the provider is unusable.
    """


class KafkaClient:
    """ksqlDB pull queries on the REST ``/query`` endpoint.

    Several metrics go in one ``IN (...)`` query; a server that refuses it
    (ksqlDB before 0.22) is asked once per metric with ``=``, and remembered.
    """

    def __init__(
        self, spec: KafkaSpec, *, timeout: float, http: aiohttp.ClientSession
    ) -> None:
        self.spec = spec
        self.url = spec.url.rstrip("/")
        self.timeout = timeout
        self.http = http
        self.requests = 0
        self.batch = True

    async def _query(self, ksql: str) -> list[list[Any]]:
        """The rows' columns; raises ``KsqlStatementError`` on a refused statement."""
        self.requests += 1
        response = await send(
            self.http,
            "POST",
            f"{self.url}/query",
            data=json.dumps({"ksql": ksql, "streamsProperties": {}}),
            headers={"Content-Type": KSQL_CONTENT_TYPE, "Accept": KSQL_CONTENT_TYPE},
            timeout=self.timeout,
        )
        check_status(response, "ksqlDB")
        body = response.json()
        if response.status_code != 200:
            if isinstance(body, dict) and "@type" in body:
                raise KsqlStatementError(f"{body.get('error_code')}: {body.get('message')}")
            raise ProviderDown(f"ksqlDB answered {response.status_code}: {body!r}"[:300])
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
                raise KsqlStatementError(str(message))
        return rows

    async def _one(self, name: str) -> float | MetricError:
        rows = await self._query(ksql_query(self.spec, [name]))
        if not rows or not rows[-1] or rows[-1][0] is None:
            return no_sample(name)
        return as_float(rows[-1][0])

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        wanted = list(dict.fromkeys(metrics))

        async def call() -> dict[str, float | MetricError]:
            refused = False
            if len(wanted) > 1 and self.batch:
                try:
                    rows = await self._query(ksql_query(self.spec, wanted))
                except KsqlStatementError:
                    refused = True
                else:
                    out: dict[str, float | MetricError] = {}
                    for row in rows:
                        if len(row) >= 2 and row[0] in wanted and row[1] is not None:
                            out[row[0]] = as_float(row[1])
                    for name in wanted:
                        out.setdefault(name, no_sample(name))
                    return out
            values = await asyncio.gather(*(self._one(m) for m in wanted))
            if refused:  # ``=`` works where ``IN`` did not: an older ksqlDB
                self.batch = False
            return dict(zip(wanted, values, strict=True))

        return await guarded(
            "ksqlDB", self.url, wanted, self.timeout, call, (ProviderDown, IndexError)
        )

    async def close(self) -> None:
        return None
