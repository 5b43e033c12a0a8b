"""Two API processes on one etcd: watches see writes made through the other; CAS has one winner."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shoal.client.rest import Conflict, ShoalClient
from shoal.model.kubernetes import Application
from shoal.testing.builders import app
from shoal.testing.launch import ApiProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(90)]


def application(name: str, namespace: str) -> Application:
    return app(name, namespace=namespace)


@pytest.fixture
async def replicas(etcd_url: str, tmp_path: Path) -> AsyncIterator[list[ShoalClient]]:
    """Two ``shoal api --store etcd://...`` processes and a client of each."""
    apis = [ApiProcess(etcd_url, log=tmp_path / f"api{i}.log") for i in range(2)]
    try:
        await asyncio.gather(*(a.wait_ready() for a in apis))
        clients = [a.client() for a in apis]
        try:
            yield clients
        finally:
            for c in clients:
                await c.close()
    finally:
        for a in apis:
            a.stop()


async def test_watch_on_one_sees_create_through_other(replicas: list[ShoalClient]) -> None:
    one, other = replicas
    ns = f"scale-{uuid.uuid4().hex[:8]}"
    listing = await other.list(Application, ns)
    assert listing.items == []

    async def first_event() -> tuple[str, str, int]:
        async for event in other.watch(Application, ns, resource_version=listing.revision):
            return event.type, event.object.metadata.name, event.revision
        raise AssertionError("watch ended without an event")

    watching = asyncio.create_task(first_event())
    await asyncio.sleep(0.3)  # the watch is open before the write
    created = await one.create(application("seen", ns))
    kind, name, revision = await asyncio.wait_for(watching, 15)
    assert (kind, name) == ("ADDED", "seen")
    assert revision == created.metadata.resource_version
    # Reads through either replica agree.
    assert (await other.get(Application, "seen", ns)).metadata.resource_version == revision


async def test_concurrent_cas_through_both_has_one_winner(replicas: list[ShoalClient]) -> None:
    ns = f"scale-{uuid.uuid4().hex[:8]}"
    base = await replicas[0].create(application("cas", ns))
    for round_ in range(5):
        current = await replicas[round_ % 2].get(Application, "cas", ns)
        assert (current.metadata.resource_version or 0) >= (base.metadata.resource_version or 0)

        async def update(i: int, current: Application = current, round_: int = round_) -> str:
            mine = current.model_copy(deep=True)
            # Unique per round: an update that changes nothing is a 200 without a write.
            mine.metadata.labels = {"writer": f"{round_}-{i}"}
            try:
                await replicas[i % 2].update(mine)
            except Conflict:
                return "conflict"
            return "ok"

        outcomes = await asyncio.gather(*(update(i) for i in range(8)))
        assert outcomes.count("ok") == 1, outcomes
        assert outcomes.count("conflict") == 7, outcomes
        winner = await replicas[(round_ + 1) % 2].get(Application, "cas", ns)
        assert (winner.metadata.resource_version or 0) > (current.metadata.resource_version or 0)
        assert winner.metadata.labels["writer"].startswith(f"{round_}-")
