"""The one list+watch loop: resume, list again on compaction, back off, resync.

The source here is a log of numbered events in memory, so that each rule of the loop
is seen on its own; the informer, reflector, deploy watches and agent sync that use it
are tested against real servers in their own folders.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shoal.machinery.listwatch import ListWatch, stop_on_failure


class Compacted(Exception):
    pass


class Broken(Exception):
    pass


class Source:
    """Events 1..n; ``script`` says how each watch call ends after delivering."""

    def __init__(self, script: list[tuple[int, Exception | None]]) -> None:
        self.events = 0  # the newest event
        self.script = list(script)
        self.listed: list[int] = []
        self.watched_from: list[int] = []
        self.seen: list[int] = []
        self.failures: list[Exception] = []
        self.done = asyncio.Event()

    async def list(self) -> int:
        self.listed.append(self.events)
        return self.events

    async def watch(self, revision: int) -> AsyncIterator[int]:
        self.watched_from.append(revision)
        if not self.script:
            self.done.set()
            await asyncio.Event().wait()
        count, error = self.script.pop(0)
        for _ in range(count):
            self.events += 1
            self.seen.append(self.events)
            yield self.events
        if error is not None:
            raise error


async def _run(loop: ListWatch[int], source: Source) -> None:
    task = asyncio.create_task(loop.run())
    await asyncio.wait_for(source.done.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_watch_that_ends_resumes_from_the_last_revision_without_listing() -> None:
    source = Source([(3, None), (2, None)])
    loop = ListWatch(source.list, source.watch, lambda e: False, lambda e: None)
    await _run(loop, source)
    assert source.listed == [0]
    assert source.watched_from == [0, 3, 5]
    assert loop.revision == 5


async def test_compaction_lists_again_at_once() -> None:
    source = Source([(2, Compacted()), (1, None)])
    loop = ListWatch(
        source.list, source.watch, lambda e: isinstance(e, Compacted), source.failures.append,
        retry=30,
    )
    await _run(loop, source)  # a back-off of 30 s would time out
    assert source.listed == [0, 2]
    assert source.watched_from == [0, 2, 3]
    assert source.failures == []


async def test_a_failure_is_reported_then_resumed_after_a_delay() -> None:
    source = Source([(1, Broken()), (1, Broken()), (1, None)])
    loop = ListWatch(
        source.list, source.watch, lambda e: False, source.failures.append, retry=0.01
    )
    await _run(loop, source)
    assert [type(e) for e in source.failures] == [Broken, Broken]
    assert source.listed == [0]
    assert source.watched_from == [0, 1, 2, 3]


async def test_failed_may_ask_for_a_list_first() -> None:
    source = Source([(2, Broken()), (1, None)])
    loop = ListWatch(source.list, source.watch, lambda e: False, lambda e: True, retry=0.01)
    await _run(loop, source)
    assert source.listed == [0, 2]


async def test_resync_lists_again_while_the_watch_is_quiet() -> None:
    source = Source([(1, None)])
    loop = ListWatch(source.list, source.watch, lambda e: False, lambda e: None, resync=1.0)
    task = asyncio.create_task(loop.run())
    await asyncio.wait_for(source.done.wait(), 5)
    assert source.listed == [0]
    async def listed_again() -> None:  # the quiet watch is cut when the resync is due
        while len(source.listed) < 2:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(listed_again(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.listed == [0, 1]


async def test_nothing_to_watch_looks_again_later() -> None:
    answers: list[int | None] = [None, 7]
    lists = 0

    async def list_() -> int | None:
        nonlocal lists
        lists += 1
        return answers.pop(0)

    source = Source([(1, None)])
    loop = ListWatch(list_, source.watch, lambda e: False, lambda e: None, max_retry=0.05)
    await _run(loop, source)
    assert lists == 2
    assert source.watched_from[0] == 7


async def test_run_until_ends_when_the_waiter_has_what_it_waits_for() -> None:
    source = Source([(3, None), (4, None)])
    reached = asyncio.Event()

    async def watch(revision: int) -> AsyncIterator[int]:
        async for seen in source.watch(revision):
            if seen == 5:
                reached.set()
            yield seen

    loop = ListWatch(source.list, watch, lambda e: False, stop_on_failure)
    await asyncio.wait_for(loop.run_until(reached), 5)
    assert source.seen[:5] == [1, 2, 3, 4, 5] and loop.revision is not None
    assert source.listed == [0]


async def test_stop_on_failure_ends_the_loop_with_the_error_but_a_compaction_lists() -> None:
    source = Source([(1, Compacted()), (2, Broken())])
    loop = ListWatch(source.list, source.watch, lambda e: isinstance(e, Compacted),
                     stop_on_failure, retry=30)  # fmt: skip
    with pytest.raises(Broken):
        await asyncio.wait_for(loop.run_until(asyncio.Event()), 5)
    assert source.listed == [0, 1]
    assert source.seen == [1, 2, 3]
