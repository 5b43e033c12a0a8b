"""Prometheus: instant queries on ``/api/v1/query``, plain metric names batched in one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import aiohttp

from shoal.model.base import ReasonCode
from shoal.model.core import PrometheusSpec
from shoal.scheduler.metrics.providers.base import (
    MetricError,
    ProviderDown,
    as_float,
    check_status,
    guarded,
    no_sample,
    send,
)

_PLAIN_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")

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

    def __init__(
        self, spec: PrometheusSpec, *, timeout: float, http: aiohttp.ClientSession
    ) -> None:
        self.url = spec.url.rstrip("/")
        self.timeout = timeout
        self.http = http
        self.requests = 0

    async def _query(self, query: str) -> tuple[str, Any] | MetricError:
        """``(resultType, result)``, or the error a 4xx query error means."""
        self.requests += 1
        response = await send(
            self.http, "POST", f"{self.url}/api/v1/query", data={"query": query},
            timeout=self.timeout,
        )
        check_status(response, "Prometheus")
        body = response.json()
        if body.get("status") != "success":
            if response.status_code in (400, 422) and body.get("errorType") in (
                "bad_data",
                "execution",
            ):
                return MetricError(
                    ReasonCode.UNKNOWN_METRIC, f"Prometheus rejected {query!r}: {body.get('error')}"
                )
            raise ProviderDown(f"Prometheus answered {response.status_code}: {body!r}"[:300])
        data = body["data"]
        return str(data["resultType"]), data["result"]

    async def _batch(self, names: list[str]) -> dict[str, float | MetricError]:
        result = await self._query(prometheus_batch_query(names))
        if isinstance(result, MetricError):
            return dict.fromkeys(names, result)
        kind, samples = result
        if kind != "vector":
            raise ProviderDown(f"batched query returned a {kind}, not a vector")
        out: dict[str, float | MetricError] = {}
        for sample in samples:
            name = sample["metric"].get("__name__")
            if name in names and name not in out:
                out[name] = as_float(sample["value"][1])
        for name in names:
            out.setdefault(name, no_sample(name))
        return out

    async def _single(self, expr: str) -> float | MetricError:
        result = await self._query(expr)
        if isinstance(result, MetricError):
            return result
        kind, data = result
        if kind == "scalar":
            return as_float(data[1])
        if kind == "vector":
            return as_float(data[0]["value"][1]) if data else no_sample(expr)
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

        return await guarded(
            "Prometheus", self.url, wanted, self.timeout, call, (ProviderDown, IndexError)
        )

    async def close(self) -> None:
        return None
