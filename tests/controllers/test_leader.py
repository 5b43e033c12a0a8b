"""Leader election on a Lease: one leader, hand-over on release, take-over on crash."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from shoal.client.rest import Conflict, ShoalClient
from shoal.controllers.leader import LeaderElection
from shoal.model.base import Metadata, utcnow
from shoal.model.coordination import Lease, LeaseSpec
from tests.util import wait_for

DURATION = 2.0
"""Seconds of a lease. A renew is due every third of it; on a loaded machine (two CI lanes,
the API in this process) a third of one second was not always enough, and a term that
lapsed and came back made the counts below wrong."""


class Candidate:
    """One elector with its run task and a record of its terms."""

    def __init__(self, client: ShoalClient, identity: str) -> None:
        self.elector = LeaderElection(client, "scheduler", identity, duration=DURATION)
        self.started = 0
        self.cancelled = 0
        self.task = asyncio.create_task(self.elector.run(self.work))

    async def work(self) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@pytest.fixture
async def pair(client: ShoalClient) -> AsyncIterator[tuple[Candidate, Candidate]]:
    """Two candidates, with a sampler failing the test if both ever lead at once."""
    a, b = Candidate(client, "a"), Candidate(client, "b")
    both: list[float] = []

    async def sample() -> None:
        while True:
            if a.elector.is_leader and b.elector.is_leader:
                both.append(time.monotonic())
            await asyncio.sleep(0.002)

    sampler = asyncio.create_task(sample())
    try:
        yield a, b
    finally:
        sampler.cancel()
        await a.stop()
        await b.stop()
    assert not both, "two leaders at once"


def leader_of(a: Candidate, b: Candidate) -> tuple[Candidate, Candidate] | None:
    if a.elector.is_leader and not b.elector.is_leader:
        return a, b
    if b.elector.is_leader and not a.elector.is_leader:
        return b, a
    return None


def leading(a: Candidate, b: Candidate) -> tuple[Candidate, Candidate] | None:
    """(leader, standby) while one of the pair leads and runs its task of this term."""
    found = leader_of(a, b)
    if found is None or found[0].started == found[0].cancelled:
        return None
    return found


async def elected(
    pair: tuple[Candidate, Candidate], started: bool = True
) -> tuple[Candidate, Candidate]:
    """(leader, standby) once one of the pair leads (and, with ``started``, runs its task).

    Asked of the pair as it is at each look, not of the first one seen leading: a term
    may end and another begin between two looks."""
    if started:
        return await wait_for(lambda: leading(*pair), message="one leader, its task running")
    return await wait_for(lambda: leader_of(*pair), message="one leader")


async def test_lease_crud_and_cas(client: ShoalClient) -> None:
    lease = await client.create(Lease(metadata=Metadata(name="x"), spec=LeaseSpec(holder="a")))
    assert (await client.get(Lease, "x")).spec.holder == "a"
    stale = lease.model_copy(deep=True)
    lease.spec.holder = "b"
    await client.update(lease)
    stale.spec.holder = "c"
    with pytest.raises(Conflict):
        await client.update(stale)


async def test_exactly_one_leads_and_renews(
    client: ShoalClient, pair: tuple[Candidate, Candidate]
) -> None:
    leader, standby = await elected(pair)
    first = await client.get(Lease, "scheduler")
    assert first.spec.holder == leader.elector.identity
    standby_terms = standby.started

    # Several renewals later the same one still leads, and the standby never started.
    async def renewed() -> bool:
        lease = await client.get(Lease, "scheduler")
        assert lease.metadata.resource_version is not None
        assert first.metadata.resource_version is not None
        return lease.metadata.resource_version >= first.metadata.resource_version + 3

    await wait_for(renewed, timeout=10, message="three renewals")
    assert leader.elector.is_leader and not standby.elector.is_leader
    assert standby.started == standby_terms
    assert (await client.get(Lease, "scheduler")).spec.holder == leader.elector.identity


async def test_release_on_cancel_hands_over_at_once(pair: tuple[Candidate, Candidate]) -> None:
    leader, standby = await elected(pair)
    ended = leader.cancelled
    await leader.stop()
    assert leader.cancelled == ended + 1
    stopped = time.monotonic()
    await wait_for(lambda: standby.elector.is_leader, timeout=5, message="standby leads")
    # Released lease: taken on the standby's next retry, well before expiry.
    assert time.monotonic() - stopped < DURATION * 0.6


async def test_crash_takeover_within_a_lease_duration(
    client: ShoalClient, pair: tuple[Candidate, Candidate]
) -> None:
    leader, standby = await elected(pair, started=False)
    before = await client.get(Lease, "scheduler")
    leader.elector._crash()
    crashed = time.monotonic()
    await wait_for(lambda: standby.elector.is_leader, timeout=5, message="standby takes over")
    took = time.monotonic() - crashed
    # Not released: the standby had to wait for expiry (>= duration - renew_every) ...
    assert took > DURATION - leader.elector.renew_every - 0.1
    # ... and took over within about one duration (plus one retry period).
    assert took < DURATION + standby.elector.retry_every + 0.3
    after = await client.get(Lease, "scheduler")
    assert after.spec.holder == standby.elector.identity
    assert after.spec.transitions == before.spec.transitions + 1


async def test_lost_cas_stops_the_leader_at_once(
    client: ShoalClient, pair: tuple[Candidate, Candidate]
) -> None:
    a, b = pair
    leader, _standby = await elected(pair)
    ended = leader.cancelled
    # Someone else writes the lease: the leader's next renew is a stale CAS (409).
    lease = await client.get(Lease, "scheduler")
    lease.spec = LeaseSpec(holder="intruder", renew_time=utcnow(), duration=DURATION)
    await client.update(lease)
    stolen = time.monotonic()
    await wait_for(
        lambda: leader.cancelled == ended + 1, timeout=5, message="leading task cancelled"
    )
    assert not leader.elector.is_leader
    assert time.monotonic() - stolen < leader.elector.renew_every + 0.3
    # After the intruder's lease expires, exactly one candidate leads again.
    await wait_for(lambda: leader_of(a, b), timeout=10, message="a leader again")
