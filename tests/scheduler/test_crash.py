"""SIGKILL the scheduler in the middle of a burst: every application ends bound exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from shoal.client.rest import ShoalClient
from shoal.testing.launch import ApiProcess, controller, kill, stop
from tests.scheduler import helpers as h
from tests.util import wait_for

APPS = 2000


@pytest.fixture
async def api_client(api_process: ApiProcess) -> AsyncIterator[ShoalClient]:
    await api_process.wait_ready(timeout=20)
    async with api_process.client() as c:
        yield c


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_scheduler_killed_mid_burst(api_process: ApiProcess, api_client: ShoalClient) -> None:
    client = api_client
    for i in range(3):
        await h.register(client, h.cluster(f"c{i}"))
    first = controller("scheduler", api_process.url)
    second = None
    try:
        burst = h.create_burst(client, APPS)

        # Kill the scheduler once it is busy binding, while applications are still coming.
        await wait_for(lambda: h.bound_count(client), timeout=60, interval=0.05, message="binds")
        kill(first)
        assert not burst.done(), "burst over before the kill: make it bigger"
        second = controller("scheduler", api_process.url)
        await burst
        listing = await h.all_bound(client, APPS, timeout=120)

        # Binding events in the history: MODIFIED with scheduled_to going from None to set,
        # up to the last application write (the store's revision moves on with events).
        last = max(a.metadata.resource_version or 0 for a in listing.items)
        bindings, current = await h.binding_history(client, last)
        assert len(current) == APPS
        assert set(bindings) == set(current)
        assert all(n == 1 for n in bindings.values()), {k: n for k, n in bindings.items() if n != 1}
        # Nor was anything moved afterwards: where it was bound is where it is.
        assert all(a.status.scheduled_to.name == current[a.metadata.name] for a in listing.items)  # type: ignore[union-attr]
    finally:
        stop(first)
        if second is not None:
            stop(second)
