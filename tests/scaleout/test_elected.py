"""``run_elected``: a controller acts only during a term, and each term gets a fresh one."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os

from shoal.client.rest import ShoalClient
from shoal.controllers.base import Controller
from shoal.controllers.elected import default_identity, run_elected
from shoal.controllers.leader import LeaderElection
from shoal.model.coordination import Lease
from tests.util import wait_for

# Long enough that a loaded machine's event-loop stall (renewals every third of it, a term
# lost after two thirds) does not hand the lease over while the test checks it is held.
DURATION = 2.0


class Probe(Controller):
    """Records its life; ``fail`` makes its task end the term with an error."""

    def __init__(self, log: list[Probe], owner: str) -> None:
        super().__init__()
        self.owner = owner
        self.running = False
        self.stopped = False
        self.fail = asyncio.Event()
        log.append(self)

    async def start(self) -> None:
        assert not self.stopped, "a stopped controller was started again"
        self.running = True
        self.spawn(self._work())

    async def _work(self) -> None:
        await self.fail.wait()
        raise RuntimeError("boom")

    async def stop(self) -> None:
        self.running = False
        self.stopped = True
        await super().stop()


def active(log: list[Probe]) -> list[Probe]:
    return [p for p in log if p.running]


async def test_one_acts_fresh_controller_per_term(client: ShoalClient) -> None:
    log: list[Probe] = []
    tasks = {
        name: asyncio.create_task(
            run_elected(functools.partial(Probe, log, name), client, "probe", name, DURATION)
        )
        for name in ("a", "b")
    }
    try:
        await wait_for(lambda: active(log), timeout=10, message="a leader")
        await asyncio.sleep(DURATION)  # the standby does not start while the lease is held
        assert len(log) == 1 and len(active(log)) == 1
        first = log[0]

        # The controller fails: its term ends, and the next term starts a new one.
        first.fail.set()
        await wait_for(lambda: len(log) == 2 and active(log), timeout=10, message="next term")
        assert first.stopped and not first.running
        assert log[1] is not first and len(active(log)) == 1

        # The leader goes away (cancelled): the lease is released, the other takes over.
        leader = log[1].owner
        other = "b" if leader == "a" else "a"
        tasks[leader].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tasks[leader]
        assert log[1].stopped
        await wait_for(
            lambda: active(log) and active(log)[0].owner == other, timeout=10, message="take-over"
        )
        assert len(active(log)) == 1
        assert (await client.get(Lease, "probe")).spec.holder == other
    finally:
        for task in tasks.values():
            task.cancel()
        for task in tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert not active(log)


async def test_custom_election_and_default_identity(client: ShoalClient) -> None:
    election = LeaderElection(client, "custom", "me", duration=DURATION)
    log: list[Probe] = []
    task = asyncio.create_task(
        run_elected(lambda: Probe(log, "me"), client, "ignored", election=election)
    )
    try:
        await wait_for(lambda: active(log), timeout=10, message="leading")
        assert (await client.get(Lease, "custom")).spec.holder == "me"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert default_identity().endswith(f"-{os.getpid()}")
