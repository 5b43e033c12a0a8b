"""What every metrics provider client shares: the answer model, the error mapping, HTTP.

Every client answers one ``fetch`` for a whole batch of metrics, so that the metric cache
costs each provider one round trip per refresh, and never raises: a provider that is down
yields an ``UNREACHABLE_METRICS_PROVIDER`` error for every metric asked, a metric the
provider does not have an ``UNKNOWN_METRIC`` error for that metric alone. HTTP goes
through aiohttp, the one HTTP client library of Shoal's processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import aiohttp
import orjson

from shoal.model.base import ReasonCode


@dataclass(frozen=True, slots=True)
class MetricError:
    """Why a metric has no usable value (a ``Reason`` in the making)."""

    code: ReasonCode
    message: str
    #: No value fetched yet (the metric or provider is new): it may well come in a moment.
    pending: bool = False


@runtime_checkable
class MetricsProviderClient(Protocol):
    """Fetches the current values of metrics from one provider."""

    #: HTTP requests (or, for static providers, lookups) made so far.
    requests: int

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        """Value or error of every metric (name inside the provider) asked for."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer, read whole."""

    status_code: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")

    def json(self) -> Any:
        return orjson.loads(self.body)  # a ValueError when it is not JSON: the provider is down


async def send(
    http: aiohttp.ClientSession, method: str, url: str, *, timeout: float, **options: Any
) -> Answer:
    """One request on the shared session; the answer read whole."""
    limit = aiohttp.ClientTimeout(total=timeout)
    async with http.request(method, url, timeout=limit, **options) as response:
        return Answer(response.status, await response.read())


def unreachable(metrics: Sequence[str], message: str) -> dict[str, float | MetricError]:
    error = MetricError(ReasonCode.UNREACHABLE_METRICS_PROVIDER, message)
    return dict.fromkeys(metrics, error)


def describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return "timed out"
    text = str(exc)
    if isinstance(exc, ProviderDown):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def guarded(
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
        aiohttp.ClientError,
        ValueError,
        KeyError,
        TypeError,
        *errors,
    )
    try:
        async with asyncio.timeout(timeout):
            return await call()
    except caught as exc:
        return unreachable(metrics, f"{name} provider at {url}: {describe(exc)}")


class ProviderDown(Exception):
    """A response that says the provider (not one metric) is unusable."""


def check_status(response: Answer, what: str) -> None:
    if response.status_code >= 500 or response.status_code in (401, 403, 404, 407):
        raise ProviderDown(f"{what} answered HTTP {response.status_code}: {response.text[:200]}")


def as_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return float(value)  # Prometheus sends "NaN", "+Inf" and decimals as strings
    raise ValueError(f"not a number: {value!r}")


def no_sample(metric: str) -> MetricError:
    return MetricError(ReasonCode.UNKNOWN_METRIC, f"no sample of {metric!r} on the provider")
