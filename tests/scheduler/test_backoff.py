"""Krake's back-off fields on an application no cluster fits: DEGRADED, then FAILED.

``spec.backoff_limit`` (not -1) puts an application under Krake's back-off: it is
DEGRADED with reason NO_SUITABLE_RESOURCE while retries are left, tried again
every ``backoff_delay × backoff`` seconds, and FAILED after ``backoff_limit``
retries. ``spec.retry_limit``, Shoal's own, wins when both are set.
"""

from __future__ import annotations

from datetime import datetime

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import ReasonCode
from shoal.model.kubernetes import Application, ApplicationState
from tests.scheduler import helpers as h
from tests.util import wait_for


def _app(name: str, *, limit: int, delay: int = 1, factor: int = 1) -> Application:
    return h.app(name, labels=["location is JP"],  # no cluster has it
                 backoff_limit=limit, backoff_delay=delay, backoff=factor)


def _written(app: Application) -> datetime:
    """When the scheduler made the attempt (its explanation's time)."""
    return datetime.fromisoformat((app.status.scheduling or {})["time"])


async def _retried(client: ShoalClient, name: str) -> Application:
    """``name`` once the scheduler has tried it twice."""

    async def tried_twice() -> Application | None:
        app = await h.get_app(client, name)
        return app if app.status.scheduler_attempts >= 2 else None

    return await wait_for(tried_twice, timeout=5, message="retried")


async def _in(client: ShoalClient, name: str, state: ApplicationState) -> Application | None:
    app = await h.get_app(client, name)
    return app if app.status.state is state else None


async def test_degraded_then_failed_after_backoff_limit(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.register(client, h.cluster("de", labels={"location": "DE"}))
    # backoff_delay × backoff = 2 s between attempts: DEGRADED is seen before FAILED.
    async with h.running(api.url, h.fast_config()):
        await client.create(_app("web", limit=1, delay=1, factor=2))
        degraded = await wait_for(
            lambda: _in(client, "web", ApplicationState.DEGRADED), timeout=5, message="DEGRADED"
        )
        assert degraded.status.reason is not None
        assert degraded.status.reason.code is ReasonCode.NO_SUITABLE_RESOURCE
        assert "No matching Kubernetes cluster found" in degraded.status.reason.message
        assert "location is JP" in degraded.status.reason.message
        assert degraded.status.scheduler_attempts == 1
        assert degraded.status.next_retry is not None
        waited = (degraded.status.next_retry - _written(degraded)).total_seconds()
        assert 1.5 <= waited <= 2.5  # backoff_delay × backoff, not the scheduler's 0.1 s

        failed = await wait_for(
            lambda: _in(client, "web", ApplicationState.FAILED), timeout=10, message="FAILED"
        )
        assert failed.status.scheduler_attempts == 2  # the first attempt and one retry
        assert failed.status.reason is not None
        assert failed.status.reason.code is ReasonCode.NO_SUITABLE_RESOURCE
        assert failed.status.scheduled_to is None


async def test_backoff_limit_zero_fails_at_once_and_minus_one_waits_pending(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.register(client, h.cluster("de", labels={"location": "DE"}))
    async with h.running(api.url, h.fast_config()):
        await client.create(_app("now", limit=0))
        await client.create(_app("ever", limit=-1))  # Krake's default: Shoal's waiting
        failed = await wait_for(
            lambda: _in(client, "now", ApplicationState.FAILED), timeout=5, message="FAILED"
        )
        assert failed.status.scheduler_attempts == 1

        ever = await _retried(client, "ever")
        assert ever.status.state is ApplicationState.PENDING
        assert ever.status.reason is not None
        assert ever.status.reason.code is ReasonCode.RESOURCE_NOT_FOUND


async def test_retry_limit_wins_over_backoff_limit(api: ApiServer, client: ShoalClient) -> None:
    await h.register(client, h.cluster("de", labels={"location": "DE"}))
    async with h.running(api.url, h.fast_config()):
        app = _app("web", limit=0)
        app.spec.retry_limit = 3
        await client.create(app)

        waiting = await _retried(client, "web")
        assert waiting.status.state is ApplicationState.PENDING  # Shoal's way: not DEGRADED
        assert waiting.status.scheduler_retries == 3 - waiting.status.scheduler_attempts
        failed = await wait_for(
            lambda: _in(client, "web", ApplicationState.FAILED), timeout=5, message="FAILED"
        )
        assert failed.status.scheduler_attempts == 3


async def test_degraded_application_is_placed_when_a_cluster_fits(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.register(client, h.cluster("de", labels={"location": "DE"}))
    async with h.running(api.url, h.fast_config()):
        await client.create(_app("web", limit=5, delay=30))  # only a cluster event can help
        await wait_for(
            lambda: _in(client, "web", ApplicationState.DEGRADED), timeout=5, message="DEGRADED"
        )
        await h.register(client, h.cluster("jp", labels={"location": "JP"}))
        assert await h.wait_bound(client, "web", "jp") == "jp"
        placed = await h.get_app(client, "web")
        assert placed.status.state is ApplicationState.PENDING  # placed, not yet deployed
        assert placed.status.reason is None


async def test_retry_delay_alone_selects_shoals_retry(api: ApiServer, client: ShoalClient) -> None:
    await h.register(client, h.cluster("de", labels={"location": "DE"}))
    async with h.running(api.url, h.fast_config()):
        app = _app("web", limit=0)
        app.spec.retry_delay = 0.2
        await client.create(app)

        waiting = await _retried(client, "web")
        assert waiting.status.state is ApplicationState.PENDING  # not FAILED at once
        assert waiting.status.reason is not None
        assert waiting.status.reason.code is ReasonCode.RESOURCE_NOT_FOUND
