"""The store contract: what every Store implementation guarantees.

Each test runs against SQLite and etcd (``store`` fixture). Keys live under a
per-test ``prefix`` because the etcd server is shared by the session; for the
same reason revisions are compared with a baseline read in the test, never
with absolute numbers.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from shoal.model.kubernetes import Application
from shoal.store.base import (
    AlreadyExists,
    Compacted,
    Conflict,
    Event,
    EventType,
    NotFound,
    Record,
    Store,
    Unavailable,
)
from shoal.store.etcd import EtcdStore
from shoal.store.factory import open_store
from tests.fixtures.etcd import EtcdCluster
from tests.store.conftest import StoreFactory
from tests.util import free_port

TIMEOUT = 10.0

ADDED, MODIFIED, DELETED = EventType.ADDED, EventType.MODIFIED, EventType.DELETED


async def next_event(events: AsyncIterator[Event]) -> Event:
    return await asyncio.wait_for(anext(events), TIMEOUT)


async def take(events: AsyncIterator[Event], n: int) -> list[Event]:
    return [await next_event(events) for _ in range(n)]


async def assert_nothing_more(store: Store, prefix: str, events: AsyncIterator[Event]) -> Event:
    """Exactness without sleeping: the next event must be a write made now (returned)."""
    key = f"{prefix}~sentinel-{uuid.uuid4().hex[:8]}"
    revision = await store.create(key, b"end")
    event = await next_event(events)
    assert (event.type, event.key, event.revision) == (ADDED, key, revision)
    return event


def triples(events: list[Event]) -> list[tuple[EventType, str, bytes]]:
    return [(e.type, e.key, e.value) for e in events]


# get / create ------------------------------------------------------------------------


async def test_get_missing_raises_not_found(store: Store, prefix: str) -> None:
    with pytest.raises(NotFound):
        await store.get(prefix + "missing")


async def test_create_then_get(store: Store, prefix: str) -> None:
    value = bytes(range(256))  # values are opaque bytes, NULs included
    revision = await store.create(prefix + "a", value)
    assert await store.get(prefix + "a") == Record(prefix + "a", value, revision)


async def test_create_existing_raises_already_exists(store: Store, prefix: str) -> None:
    revision = await store.create(prefix + "a", b"1")
    with pytest.raises(AlreadyExists):
        await store.create(prefix + "a", b"2")
    assert await store.get(prefix + "a") == Record(prefix + "a", b"1", revision)
    assert await store.revision() == revision  # a failed write writes nothing


async def test_create_after_delete(store: Store, prefix: str) -> None:
    await store.create(prefix + "a", b"1")
    await store.delete(prefix + "a")
    revision = await store.create(prefix + "a", b"2")
    assert await store.get(prefix + "a") == Record(prefix + "a", b"2", revision)


async def test_empty_value(store: Store, prefix: str) -> None:
    revision = await store.create(prefix + "a", b"")
    assert await store.get(prefix + "a") == Record(prefix + "a", b"", revision)


# update ------------------------------------------------------------------------------


async def test_update_unconditional(store: Store, prefix: str) -> None:
    first = await store.create(prefix + "a", b"1")
    second = await store.update(prefix + "a", b"2")
    assert second > first
    assert await store.get(prefix + "a") == Record(prefix + "a", b"2", second)


async def test_update_with_expected_revision(store: Store, prefix: str) -> None:
    first = await store.create(prefix + "a", b"1")
    second = await store.update(prefix + "a", b"2", expected_revision=first)
    third = await store.update(prefix + "a", b"3", expected_revision=second)
    assert first < second < third
    assert await store.get(prefix + "a") == Record(prefix + "a", b"3", third)


async def test_update_stale_revision_conflicts(store: Store, prefix: str) -> None:
    first = await store.create(prefix + "a", b"1")
    second = await store.update(prefix + "a", b"2")
    with pytest.raises(Conflict) as raised:
        await store.update(prefix + "a", b"3", expected_revision=first)
    assert (raised.value.key, raised.value.expected, raised.value.actual) == (
        prefix + "a",
        first,
        second,
    )
    assert await store.get(prefix + "a") == Record(prefix + "a", b"2", second)
    assert await store.revision() == second


@pytest.mark.parametrize("expected", [None, 1, 0])
async def test_update_missing_raises_not_found(
    store: Store, prefix: str, expected: int | None
) -> None:
    before = await store.revision()
    with pytest.raises(NotFound):
        await store.update(prefix + "missing", b"x", expected_revision=expected)
    with pytest.raises(NotFound):
        await store.get(prefix + "missing")  # update never creates
    assert await store.revision() == before


async def test_update_deleted_key_with_its_old_revision_is_not_found(
    store: Store, prefix: str
) -> None:
    revision = await store.create(prefix + "a", b"1")
    await store.delete(prefix + "a")
    with pytest.raises(NotFound):
        await store.update(prefix + "a", b"2", expected_revision=revision)


# delete ------------------------------------------------------------------------------


async def test_delete_unconditional(store: Store, prefix: str) -> None:
    created = await store.create(prefix + "a", b"1")
    deleted = await store.delete(prefix + "a")
    assert deleted > created
    with pytest.raises(NotFound):
        await store.get(prefix + "a")
    assert await store.revision() == deleted


async def test_delete_with_expected_revision(store: Store, prefix: str) -> None:
    created = await store.create(prefix + "a", b"1")
    deleted = await store.delete(prefix + "a", expected_revision=created)
    assert deleted > created
    with pytest.raises(NotFound):
        await store.get(prefix + "a")


async def test_delete_stale_revision_conflicts(store: Store, prefix: str) -> None:
    created = await store.create(prefix + "a", b"1")
    updated = await store.update(prefix + "a", b"2")
    with pytest.raises(Conflict) as raised:
        await store.delete(prefix + "a", expected_revision=created)
    assert (raised.value.key, raised.value.expected, raised.value.actual) == (
        prefix + "a",
        created,
        updated,
    )
    assert await store.get(prefix + "a") == Record(prefix + "a", b"2", updated)


@pytest.mark.parametrize("expected", [None, 1])
async def test_delete_missing_raises_not_found(
    store: Store, prefix: str, expected: int | None
) -> None:
    before = await store.revision()
    with pytest.raises(NotFound):
        await store.delete(prefix + "missing", expected_revision=expected)
    assert await store.revision() == before


# revisions ---------------------------------------------------------------------------


async def test_revisions_increase_store_wide(store: Store, prefix: str) -> None:
    start = await store.revision()
    revisions = [
        await store.create(prefix + "a", b"1"),
        await store.create(prefix + "b", b"1"),
        await store.update(prefix + "a", b"2"),
        await store.create(prefix + "c", b"1"),
        await store.delete(prefix + "b"),
        await store.update(prefix + "c", b"2"),
    ]
    assert start < revisions[0]
    assert all(a < b for a, b in itertools.pairwise(revisions))
    assert await store.revision() == revisions[-1]
    # An object's revision is the revision of its last write, whatever came after.
    assert (await store.get(prefix + "a")).revision == revisions[2]
    assert (await store.get(prefix + "c")).revision == revisions[5]


# list --------------------------------------------------------------------------------


async def test_list_in_key_order_with_revision(store: Store, prefix: str) -> None:
    keys = [f"{prefix}{name}" for name in ("b", "a", "c/d", "c", "a0", "B", "aa")]
    written = {}
    for key in keys:
        written[key] = await store.create(key, key.encode())
    records, revision = await store.list(prefix)
    assert [r.key for r in records] == sorted(keys)
    assert all(r.value == r.key.encode() and r.revision == written[r.key] for r in records)
    assert revision == await store.revision() == max(written.values())


async def test_list_revision_tracks_other_keys(store: Store, prefix: str) -> None:
    await store.create(prefix + "in/a", b"")
    last = await store.create(prefix + "out", b"")
    records, revision = await store.list(prefix + "in/")
    assert [r.key for r in records] == [prefix + "in/a"]
    assert revision == last  # the store revision, not the newest listed record's


async def test_list_empty_prefix_returns_revision(store: Store, prefix: str) -> None:
    last = await store.create(prefix + "x", b"")
    assert await store.list(prefix + "nothing/") == ([], last)


async def test_list_paging(store: Store, prefix: str) -> None:
    keys = sorted(f"{prefix}{i:03d}" for i in range(25))
    for key in random.Random(7).sample(keys, len(keys)):
        await store.create(key, b"v")
    seen: list[str] = []
    after: str | None = None
    pages = 0
    while True:
        page, _ = await store.list(prefix, start_after=after, limit=7)
        pages += 1
        if not page:
            break
        assert len(page) <= 7
        seen += [r.key for r in page]
        after = page[-1].key
    assert seen == keys
    assert pages == 5  # 7 + 7 + 7 + 4, then an empty page


async def test_list_start_after_and_limit_edges(store: Store, prefix: str) -> None:
    for name in ("a", "b", "c"):
        await store.create(prefix + name, b"")

    async def keys(**kwargs: object) -> list[str]:
        records, _ = await store.list(prefix, **kwargs)  # type: ignore[arg-type]
        return [r.key[len(prefix) :] for r in records]

    assert await keys(limit=2) == ["a", "b"]
    assert await keys(limit=100) == ["a", "b", "c"]
    assert await keys(start_after=prefix + "a") == ["b", "c"]
    assert await keys(start_after=prefix + "a0") == ["b", "c"]  # need not exist
    assert await keys(start_after=prefix + "c") == []
    assert await keys(start_after=prefix + "b", limit=1) == ["c"]
    # A start_after below the prefix does not leak keys from outside it.
    await store.create(prefix[:-1], b"")  # "/test/x" sorts before "/test/x/..."
    assert await keys(start_after=prefix[:-2]) == ["a", "b", "c"]
    assert await keys(start_after="") == ["a", "b", "c"]


SPECIAL = ["b/x", "b/_x", "b/%y", "bc/x", "b_/z", "b%/z", "b", "b0/x", "a/b/x", "b/sub/deep"]


async def test_list_prefix_isolation(store: Store, prefix: str) -> None:
    for name in SPECIAL:
        await store.create(prefix + name, name.encode())
    records, _ = await store.list(prefix + "b/")
    assert [r.key[len(prefix) :] for r in records] == ["b/%y", "b/_x", "b/sub/deep", "b/x"]
    records, _ = await store.list(prefix + "b_/")
    assert [r.key[len(prefix) :] for r in records] == ["b_/z"]
    records, _ = await store.list(prefix + "b%/")
    assert [r.key[len(prefix) :] for r in records] == ["b%/z"]


async def test_non_ascii_keys(store: Store, prefix: str) -> None:
    keys = [prefix + "é/1", prefix + "e/1", prefix + "日本/1", prefix + "éa"]
    for key in keys:
        await store.create(key, b"")
    records, _ = await store.list(prefix + "é/")
    assert [r.key for r in records] == [prefix + "é/1"]
    records, _ = await store.list(prefix)
    assert [r.key for r in records] == sorted(keys, key=lambda k: k.encode())


# watch -------------------------------------------------------------------------------


async def test_watch_from_revision_replays_history(store: Store, prefix: str) -> None:
    start = await store.revision()
    r1 = await store.create(prefix + "a", b"1")
    r2 = await store.update(prefix + "a", b"2")
    r3 = await store.create(prefix + "b", b"x")
    r4 = await store.delete(prefix + "a")
    r5 = await store.update(prefix + "b", b"y", expected_revision=r3)
    r6 = await store.delete(prefix + "b", expected_revision=r5)
    expected = [
        Event(ADDED, prefix + "a", b"1", r1),
        Event(MODIFIED, prefix + "a", b"2", r2),
        Event(ADDED, prefix + "b", b"x", r3),
        Event(DELETED, prefix + "a", b"2", r4),  # DELETED carries the last value
        Event(MODIFIED, prefix + "b", b"y", r5),
        Event(DELETED, prefix + "b", b"y", r6),
    ]
    async with aclosing(store.watch(prefix, start)) as events:
        assert await take(events, 6) == expected
        sentinel = await assert_nothing_more(store, prefix, events)
    # From the middle: only the events after that revision.
    async with aclosing(store.watch(prefix, r3)) as events:
        assert await take(events, 4) == [*expected[3:], sentinel]
        await assert_nothing_more(store, prefix, events)


async def test_watch_then_write_live(store: Store, prefix: str) -> None:
    start = await store.revision()
    async with aclosing(store.watch(prefix, start)) as events:
        first = asyncio.ensure_future(next_event(events))
        r1 = await store.create(prefix + "a", b"1")
        assert await first == Event(ADDED, prefix + "a", b"1", r1)
        r2 = await store.update(prefix + "a", b"2")
        r3 = await store.delete(prefix + "a")
        assert await take(events, 2) == [
            Event(MODIFIED, prefix + "a", b"2", r2),
            Event(DELETED, prefix + "a", b"2", r3),
        ]


async def test_watch_recreated_key_is_added(store: Store, prefix: str) -> None:
    start = await store.revision()
    await store.create(prefix + "a", b"1")
    await store.delete(prefix + "a")
    await store.create(prefix + "a", b"2")
    async with aclosing(store.watch(prefix, start)) as events:
        assert triples(await take(events, 3)) == [
            (ADDED, prefix + "a", b"1"),
            (DELETED, prefix + "a", b"1"),
            (ADDED, prefix + "a", b"2"),
        ]


async def test_watch_prefix_isolation(store: Store, prefix: str) -> None:
    start = await store.revision()
    for name in SPECIAL:
        await store.create(prefix + name, b"")
    async with aclosing(store.watch(prefix + "b/", start)) as events:
        got = await take(events, 4)
        assert [e.key[len(prefix) :] for e in got] == ["b/x", "b/_x", "b/%y", "b/sub/deep"]
        await assert_nothing_more(store, prefix + "b/", events)


async def test_watch_from_current_revision_sees_nothing_old(store: Store, prefix: str) -> None:
    await store.create(prefix + "old", b"")
    _, revision = await store.list(prefix)
    async with aclosing(store.watch(prefix, revision)) as events:
        await assert_nothing_more(store, prefix, events)


async def test_watch_without_revision_sees_only_later_writes(store: Store, prefix: str) -> None:
    before = await store.create(prefix + "before", b"")
    await store.update(prefix + "before", b"again")
    async with aclosing(store.watch(prefix)) as events:
        first = asyncio.ensure_future(next_event(events))
        # The watch registers at some point after first iteration starts; keep
        # writing until it reports one of these writes, never an earlier one.
        written: dict[int, str] = {}
        for i in range(500):
            key = f"{prefix}later-{i:03d}"
            written[await store.create(key, b"")] = key
            await asyncio.sleep(0.01)
            if first.done():
                break
        event = await first
        assert event.revision > before
        assert event.type is ADDED and written[event.revision] == event.key
        # From there on, every later write arrives, in order.
        later = [r for r in sorted(written) if r > event.revision]
        assert [e.revision for e in await take(events, len(later))] == later


async def test_watch_is_lazy_and_independent(store: Store, prefix: str) -> None:
    start = await store.revision()
    r1 = await store.create(prefix + "a", b"")
    async with (
        aclosing(store.watch(prefix, start)) as one,
        aclosing(store.watch(prefix, start)) as two,
    ):
        assert (await next_event(one)).revision == r1
        r2 = await store.create(prefix + "b", b"")
        assert [e.revision for e in await take(two, 2)] == [r1, r2]
        assert (await next_event(one)).revision == r2


# compaction ---------------------------------------------------------------------------


async def test_compaction(store: Store, prefix: str) -> None:
    start = await store.revision()
    r1 = await store.create(prefix + "a", b"1")
    r2 = await store.update(prefix + "a", b"2")
    r3 = await store.create(prefix + "b", b"1")
    r4 = await store.update(prefix + "a", b"3")
    await store.compact(r3)

    for old in (start, r1, r2):
        events = store.watch(prefix, old)  # raises on first iteration, not on creation
        with pytest.raises(Compacted) as raised:
            await anext(events)
        assert raised.value.requested == old
        assert raised.value.compacted == r3
        with pytest.raises(Compacted):
            await store.check_revision(old)

    # Current state is untouched by compaction.
    assert await store.get(prefix + "a") == Record(prefix + "a", b"3", r4)
    records, _ = await store.list(prefix)
    assert [(r.key, r.revision) for r in records] == [(prefix + "a", r4), (prefix + "b", r3)]

    await store.check_revision(r3)
    await store.check_revision(r4)
    async with aclosing(store.watch(prefix, r3)) as events:
        assert await take(events, 1) == [Event(MODIFIED, prefix + "a", b"3", r4)]
        await assert_nothing_more(store, prefix, events)
    # Compacting again at or below the compaction point is a no-op.
    await store.compact(r2)
    await store.compact(r3)
    await store.check_revision(r3)


async def test_compaction_during_replay_never_skips(store: Store, prefix: str) -> None:
    """A watcher overtaken by compaction mid-stream ends (or goes on); it never skips."""
    start = await store.revision()
    n = 1_200  # more than one replay batch in both stores
    revisions = await asyncio.gather(*(store.create(f"{prefix}k{i:05d}", b"") for i in range(n)))
    expected = sorted(revisions)
    got: list[int] = []
    async with aclosing(store.watch(prefix, start)) as events:
        got += [e.revision for e in await take(events, 5)]
        await store.compact(await store.revision())
        sentinel = await store.create(prefix + "~after", b"")
        while True:
            try:
                event = await next_event(events)
            except StopAsyncIteration:
                ended = True
                break
            if event.revision == sentinel:
                ended = False
                break
            got.append(event.revision)
    assert got == expected[: len(got)]  # a gap-free prefix of the history
    assert ended or got == expected
    if ended:  # resuming from the last revision seen is refused: re-list
        with pytest.raises(Compacted):
            await anext(store.watch(prefix, got[-1]))


async def test_compact_beyond_head_is_clamped(store: Store, prefix: str) -> None:
    head = await store.create(prefix + "a", b"")
    await store.compact(head + 1000)
    await store.check_revision(head)
    async with aclosing(store.watch(prefix, head)) as events:
        await assert_nothing_more(store, prefix, events)


# concurrency -----------------------------------------------------------------------------

N_CONCURRENT = 2_000


async def test_concurrent_creates_watch_and_resume(store: Store, prefix: str) -> None:
    start = await store.revision()
    keys = [f"{prefix}k{i:05d}" for i in range(N_CONCURRENT)]

    async def watch_all() -> list[Event]:
        seen: list[Event] = []
        async with aclosing(store.watch(prefix, start)) as events:
            async for event in events:
                seen.append(event)
                if len(seen) == N_CONCURRENT:
                    return seen
        raise AssertionError("watch ended early")

    watcher = asyncio.create_task(watch_all())
    revisions = await asyncio.gather(*(store.create(key, b"v") for key in keys))
    events = await asyncio.wait_for(watcher, 30)

    assert len(set(revisions)) == N_CONCURRENT
    assert all(e.type is ADDED for e in events)
    assert [e.revision for e in events] == sorted(revisions)
    assert {e.key for e in events} == set(keys)
    assert all(a.revision < b.revision for a, b in itertools.pairwise(events))

    # Cut a watch halfway, resume from the last revision seen: the rest exactly once.
    first: list[Event] = []
    async with aclosing(store.watch(prefix, start)) as stream:
        async for event in stream:
            first.append(event)
            if len(first) == N_CONCURRENT // 2:
                break
    async with aclosing(store.watch(prefix, first[-1].revision)) as stream:
        rest = await take(stream, N_CONCURRENT - len(first))
        await assert_nothing_more(store, prefix, stream)
    assert first + rest == events


async def test_concurrent_compare_and_swap_has_one_winner(store: Store, prefix: str) -> None:
    revision = await store.create(prefix + "a", b"0")
    results = await asyncio.gather(
        *(store.update(prefix + "a", str(i).encode(), expected_revision=revision)
          for i in range(50)),
        return_exceptions=True,
    )  # fmt: skip
    winners = [r for r in results if isinstance(r, int)]
    losers = [r for r in results if not isinstance(r, int)]
    assert len(winners) == 1
    assert all(isinstance(r, Conflict) for r in losers), losers
    assert all(c.expected == revision and c.actual == winners[0] for c in losers)  # type: ignore[union-attr]
    record = await store.get(prefix + "a")
    assert record.revision == winners[0]
    assert record.value == str(results.index(winners[0])).encode()


async def test_concurrent_create_has_one_winner(store: Store, prefix: str) -> None:
    results = await asyncio.gather(
        *(store.create(prefix + "a", str(i).encode()) for i in range(50)),
        return_exceptions=True,
    )
    winners = [r for r in results if isinstance(r, int)]
    assert len(winners) == 1
    assert all(isinstance(r, AlreadyExists) for r in results if not isinstance(r, int))


async def test_concurrent_conditional_delete_has_one_winner(store: Store, prefix: str) -> None:
    revision = await store.create(prefix + "a", b"0")
    results = await asyncio.gather(
        *(store.delete(prefix + "a", expected_revision=revision) for _ in range(20)),
        return_exceptions=True,
    )
    assert len([r for r in results if isinstance(r, int)]) == 1
    # Losers saw the key gone (NotFound) or, racing the winner, a Conflict.
    assert all(isinstance(r, NotFound | Conflict) for r in results if not isinstance(r, int))


# model-based: a dict and an event log ----------------------------------------------------------


class StoreModel(RuleBasedStateMachine):
    """Random operations against a dict; every result and the whole event log must match."""

    factory: StoreFactory
    keys = st.sampled_from(["a", "b", "b/c", "b_", "b%", "c/d/e"])
    values = st.binary(max_size=8)

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.store = self.factory()
        self.prefix = f"/model/{uuid.uuid4().hex}/"
        self.model: dict[str, tuple[bytes, int]] = {}
        self.log: list[Event] = []
        self.start = self.last = self.run(self.store.revision())

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.runner.run(coro)

    def wrote(self, revision: int) -> None:
        assert revision > self.last
        self.last = revision

    @rule(key=keys, value=values)
    def create(self, key: str, value: bytes) -> None:
        k = self.prefix + key
        try:
            revision = self.run(self.store.create(k, value))
        except AlreadyExists:
            assert k in self.model
            return
        assert k not in self.model
        self.wrote(revision)
        self.model[k] = (value, revision)
        self.log.append(Event(ADDED, k, value, revision))

    @rule(key=keys, value=values, cas=st.sampled_from(["none", "current", "stale"]))
    def update(self, key: str, value: bytes, cas: str) -> None:
        k = self.prefix + key
        current = self.model.get(k)
        expected = {"none": None, "current": current[1] if current else 1, "stale": 1}[cas]
        try:
            revision = self.run(self.store.update(k, value, expected_revision=expected))
        except NotFound:
            assert current is None
            return
        except Conflict as conflict:
            assert current is not None and expected is not None and expected != current[1]
            assert (conflict.expected, conflict.actual) == (expected, current[1])
            return
        assert current is not None and expected in (None, current[1])
        self.wrote(revision)
        self.model[k] = (value, revision)
        self.log.append(Event(MODIFIED, k, value, revision))

    @rule(key=keys, cas=st.booleans())
    def delete(self, key: str, cas: bool) -> None:
        k = self.prefix + key
        current = self.model.get(k)
        expected = (current[1] if current else 1) if cas else None
        try:
            revision = self.run(self.store.delete(k, expected_revision=expected))
        except NotFound:
            assert current is None
            return
        assert current is not None
        self.wrote(revision)
        del self.model[k]
        self.log.append(Event(DELETED, k, current[0], revision))

    @rule(key=keys)
    def get(self, key: str) -> None:
        k = self.prefix + key
        try:
            record = self.run(self.store.get(k))
        except NotFound:
            assert k not in self.model
            return
        assert (record.value, record.revision) == self.model[k]

    @rule(sub=st.sampled_from(["", "b", "b/", "c/", "c/d/"]), limit=st.none() | st.integers(1, 4))
    def list(self, sub: str, limit: int | None) -> None:
        p = self.prefix + sub
        expected = sorted((k, v, r) for k, (v, r) in self.model.items() if k.startswith(p))
        got: list[tuple[str, bytes, int]] = []
        after: str | None = None
        while True:
            records, revision = self.run(self.store.list(p, start_after=after, limit=limit))
            assert revision == self.last
            got += [(r.key, r.value, r.revision) for r in records]
            if not records or limit is None:
                break
            after = records[-1].key
        assert got == expected

    @precondition(lambda self: self.log)
    @rule(data=st.data())
    def watch(self, data: st.DataObject) -> None:
        """Replay from any point in the log: exactly the later events, in order."""
        index = data.draw(st.integers(0, len(self.log) - 1))
        after = self.start if index == 0 else self.log[index - 1].revision
        wanted = self.log[index:]

        async def replay() -> list[Event]:
            async with aclosing(self.store.watch(self.prefix, after)) as events:
                return await take(events, len(wanted))

        assert self.run(replay()) == wanted

    @invariant()
    def revision_is_last_write(self) -> None:
        assert self.run(self.store.revision()) == self.last

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
        finally:
            self.runner.close()


def test_model(store_factory: StoreFactory) -> None:
    machine = type("Model", (StoreModel,), {"factory": staticmethod(store_factory)})
    run_state_machine_as_test(
        machine,  # type: ignore[arg-type]
        settings=settings(
            max_examples=20,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# etcd specifics: URLs, endpoints, failures -------------------------------------------------


@pytest.mark.integration
async def test_open_store_etcd_url(etcd_url: str, prefix: str) -> None:
    store = open_store(etcd_url)
    try:
        assert isinstance(store, EtcdStore)
        revision = await store.create(prefix + "a", b"1")
        assert (await store.get(prefix + "a")).revision == revision
    finally:
        await store.close()


@pytest.mark.integration
async def test_etcd_fails_over_to_the_next_endpoint(etcd_url: str, prefix: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    store = EtcdStore.from_url(f"etcd://{dead},{etcd_url[len('etcd://') :]}")
    try:
        revision = await store.create(prefix + "a", b"1")  # never sent to the dead one
        assert (await store.get(prefix + "a")).revision == revision
        async with aclosing(store.watch(prefix, revision - 1)) as events:
            assert (await next_event(events)).revision == revision
    finally:
        await store.close()


@pytest.mark.integration
async def test_etcd_unreachable_raises_unavailable(prefix: str) -> None:
    store = EtcdStore.from_url(f"etcd://127.0.0.1:{free_port()}", timeout=2)
    try:
        with pytest.raises(Unavailable):
            await store.get(prefix + "a")
        with pytest.raises(Unavailable):
            await store.create(prefix + "a", b"")
        with pytest.raises(Unavailable):
            await anext(store.watch(prefix))
    finally:
        await store.close()


@pytest.mark.integration
async def test_etcd_cluster_survives_a_killed_member(etcd_cluster: EtcdCluster) -> None:
    # A write in flight when the leader dies times out in etcd only after 6 s
    # (5 s + 2 election timeouts); a short client deadline gives up sooner.
    store = EtcdStore.from_url(etcd_cluster.url, timeout=1.5)
    try:
        first = await store.create("/ha/a", b"1")
        etcd_cluster.members[0].kill()
        # The first endpoint is gone; calls move on to the survivors (retrying
        # while they elect a new leader if the killed member led).
        for _ in range(100):
            try:
                second = await store.update("/ha/a", b"2", expected_revision=first)
                break
            except Unavailable:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("cluster did not recover")
        assert await store.get("/ha/a") == Record("/ha/a", b"2", second)
        async with aclosing(store.watch("/ha/", first - 1)) as events:
            assert [e.revision for e in await take(events, 2)] == [first, second]
    finally:
        await store.close()


# Krake's names in keys ------------------------------------------------------------------


async def test_namespaces_with_colons_and_dots_keep_to_their_own_keys(
    store: Store, prefix: str
) -> None:
    """``/{api}/{plural}/{namespace}/{name}``: ':' sorts after '/', '.' before it; a list or
    a watch of one namespace's prefix reaches no other namespace's objects."""
    namespaces = ["a", "a:b", "a.b", "a_b", "a-b", "a:b:c", "system:admin"]

    def key(namespace: str, name: str) -> str:
        return prefix.rstrip("/") + Application.key(name, namespace)

    def under(namespace: str) -> str:
        return prefix.rstrip("/") + Application.key_prefix(namespace)

    start = await store.revision()
    for ns in namespaces:
        for name in ("x", "x:y", "x.y"):
            await store.create(key(ns, name), ns.encode())
    for ns in namespaces:
        records, _ = await store.list(under(ns))
        assert [r.key for r in records] == sorted(key(ns, n) for n in ("x", "x:y", "x.y"))
        assert {r.value for r in records} == {ns.encode()}
        async with aclosing(store.watch(under(ns), start)) as events:
            assert {e.value for e in await take(events, 3)} == {ns.encode()}
            await assert_nothing_more(store, under(ns), events)
    everything, _ = await store.list(prefix.rstrip("/") + Application.key_prefix())
    assert len(everything) == 3 * len(namespaces) + len(namespaces)  # and a sentinel each
