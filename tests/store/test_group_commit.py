"""Group commit of the SQLite store: shared commits, no read of an uncommitted write.

The writes of one event loop turn share a transaction. These tests pin what
that must not change: a write answers after its commit, readers and watchers
see only committed writes, a refusal is answered once the group committed (a
read then shows why), a failed group fails every writer in it, and an answered
write survives a SIGKILL of the process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shoal.store.base import Conflict, EventType, NotFound, Unavailable
from shoal.store.sqlite import SqliteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    instance = SqliteStore(str(tmp_path / "store.db"))
    try:
        yield instance
    finally:
        await instance.close()


async def test_concurrent_writes_share_commits_and_keep_their_order(store: SqliteStore) -> None:
    before = store.commits
    revisions = await asyncio.gather(*(store.create(f"/k/{i:03d}", b"v") for i in range(64)))
    assert sorted(revisions) == list(range(1, 65))
    assert store.commits - before < 64 / 4  # 64 writes in one turn: a few commits at most
    events = store.watch("/k/", from_revision=0)
    seen = [await anext(events) for _ in range(64)]
    await events.aclose()
    assert [(e.key, e.revision) for e in seen] == sorted(
        (f"/k/{i:03d}", r) for i, r in enumerate(revisions)
    )
    assert await store.revision() == 64


async def _pending(store: SqliteStore, key: str) -> asyncio.Task[int]:
    """A create of ``key`` that ran its statements and waits for its group's commit."""
    task = asyncio.create_task(store.create(key, b"new"))
    await asyncio.sleep(0)  # the task runs first: its write is in, its commit is next turn
    assert not task.done()
    return task


async def test_readers_and_watchers_see_a_write_only_once_committed(store: SqliteStore) -> None:
    await store.create("/a", b"old")
    pending = await _pending(store, "/b")
    # Watchers start from the committed revision (what revision() says), so a watch
    # from 1 begun now gets /b once, from the commit, not also from the log.
    assert await store.revision() == 1  # not 2: the write is not committed yet
    listed, at = await store.list("/")
    assert ([r.key for r in listed], at) == (["/a"], 1)
    events = store.watch("/", from_revision=1)
    first = asyncio.ensure_future(anext(events))
    record = await store.get("/b")  # a key the open group wrote: waits for its commit
    assert task_result(pending) == record.revision == 2
    await store.create("/c", b"v")
    seen = [await asyncio.wait_for(first, 5), await asyncio.wait_for(anext(events), 5)]
    assert [(e.type, e.key, e.revision) for e in seen] == [
        (EventType.ADDED, "/b", 2),
        (EventType.ADDED, "/c", 3),
    ]
    await events.aclose()


def task_result(task: asyncio.Task[int]) -> int:
    assert task.done(), "the write answered before its commit"
    return task.result()


async def test_a_conflict_is_answered_after_the_write_it_lost_to_committed(
    store: SqliteStore,
) -> None:
    first = await store.create("/k", b"1")
    winner = asyncio.create_task(store.update("/k", b"2", first))
    await asyncio.sleep(0)
    with pytest.raises(Conflict) as lost:
        await store.update("/k", b"3", first)
    assert task_result(winner) == lost.value.actual
    assert (await store.get("/k")).revision == lost.value.actual  # the reader sees why


async def test_a_write_that_breaks_fails_its_whole_group(store: SqliteStore) -> None:
    await store.create("/k", b"1")
    good = await _pending(store, "/good")
    with pytest.raises(sqlite3.Error):
        await store.update("/k", object())  # type: ignore[arg-type]  # cannot be bound
    with pytest.raises(Unavailable):
        await good  # rolled back with the group: told, not acknowledged
    with pytest.raises(NotFound):
        await store.get("/good")
    assert await store.revision() == 1
    assert await store.create("/after", b"v") == 2  # the next group is a fresh one


async def test_a_failed_batch_leaves_the_rest_of_its_group(store: SqliteStore) -> None:
    other = await _pending(store, "/other")
    with pytest.raises(RuntimeError):
        async with store.batch():
            await store.create("/in-batch", b"v")
            assert (await store.get("/in-batch")).value == b"v"  # a batch reads its writes
            raise RuntimeError("the caller gave up")
    assert await other == 1
    with pytest.raises(NotFound):
        await store.get("/in-batch")
    async with store.batch():
        await store.create("/in-batch", b"v")
    assert (await store.get("/in-batch")).revision == 2


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from shoal.store.sqlite import SqliteStore

    async def main():
        store = SqliteStore(sys.argv[1])
        async def writer(w):
            for i in range(10**6):
                revision = await store.create(f"/k/{w:02d}-{i:06d}", b"v" * 200)
                sys.stdout.write(f"{w:02d}-{i:06d} {revision}\\n")
                sys.stdout.flush()
        await asyncio.gather(*(writer(w) for w in range(32)))

    asyncio.run(main())
    """
)


@pytest.mark.integration
def test_every_answered_write_survives_a_kill(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, path],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert child.stdout is not None
    answered: dict[str, int] = {}
    while len(answered) < 3_000:
        line = child.stdout.readline()
        assert line, "the writer died"
        name, revision = line.decode().split()
        answered[f"/k/{name}"] = int(revision)
    child.send_signal(signal.SIGKILL)
    child.wait()
    asyncio.run(_audit(path, answered))


async def _audit(path: str, answered: dict[str, int]) -> None:
    store = SqliteStore(path)
    try:
        records, head = await store.list("/k/")
        kept = {r.key: r.revision for r in records}
        assert {k: kept.get(k) for k in answered} == answered  # nothing answered is lost
        assert head == max(kept.values()) == len(kept)  # no gap, no revision reused
        events = store.watch("/k/", from_revision=0)
        replayed = [await anext(events) for _ in range(len(kept))]
        await events.aclose()  # type: ignore[attr-defined]
        assert {e.key: e.revision for e in replayed} == kept  # the log agrees with the keys
        assert await store.create("/after", b"v") == head + 1
    finally:
        await store.close()
