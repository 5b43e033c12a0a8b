"""The SQLite store writes each value once, to the watch log; the key table names the row.

These tests pin what that layout must keep: a key's value survives compaction of
the history it was written in (and a delete after it still carries the value),
and a store written by an earlier Shoal, with values in the key table too and part
of its log compacted away, opens with every key, value and revision intact.
"""

from __future__ import annotations

import sqlite3
from contextlib import aclosing
from pathlib import Path

from shoal.store.base import Event, EventType, Record
from shoal.store.sqlite import SqliteStore

# The layout of Shoal's stores before values were written once.
_EARLIER_SCHEMA = """
CREATE TABLE kv (
    key TEXT PRIMARY KEY, value BLOB NOT NULL, revision INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE log (
    revision INTEGER PRIMARY KEY, type INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL
);
CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


async def test_values_outlive_the_compaction_of_their_writes(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "store.db"))
    try:
        r1 = await store.create("/k/a", b"a1")
        r2 = await store.create("/k/b", b"b1")
        r3 = await store.update("/k/b", b"b2")
        await store.compact(r3)
        assert await store.get("/k/a") == Record("/k/a", b"a1", r1)
        records, _ = await store.list("/k/")
        assert records == [Record("/k/a", b"a1", r1), Record("/k/b", b"b2", r3)]
        rows = store._db.execute("SELECT revision FROM log ORDER BY revision").fetchall()
        assert [r for (r,) in rows] == [r1, r3]  # b's first value (r2) is history: gone
        assert r2 not in {r for (r,) in rows}
        async with aclosing(store.watch("/k/", r3)) as events:
            deleted = await store.delete("/k/a", r1)
            assert await anext(events) == Event(EventType.DELETED, "/k/a", b"a1", deleted)
        await store.compact(deleted)
        rows = store._db.execute("SELECT revision FROM log ORDER BY revision").fetchall()
        assert [r for (r,) in rows] == [r3]  # a's value went with a
    finally:
        await store.close()


async def test_a_store_written_by_an_earlier_shoal_opens_intact(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(_EARLIER_SCHEMA)
    # a: written at 1, its log row compacted away; b: written at 2 and 4, log kept from 3;
    # c: created at 3, deleted at 5.
    db.executemany(
        "INSERT INTO kv(key, value, revision) VALUES (?, ?, ?)",
        [("/k/a", b"a1", 1), ("/k/b", b"b2", 4)],
    )
    db.executemany(
        "INSERT INTO log(revision, type, key, value) VALUES (?, ?, ?, ?)",
        [(3, 0, "/k/c", b"c1"), (4, 1, "/k/b", b"b2"), (5, 2, "/k/c", b"c1")],
    )
    db.executemany(
        "INSERT INTO meta(name, value) VALUES (?, ?)", [("revision", 5), ("compacted", 2)]
    )
    db.close()

    store = SqliteStore(path)
    try:
        records, head = await store.list("/k/")
        assert head == 5
        assert records == [Record("/k/a", b"a1", 1), Record("/k/b", b"b2", 4)]
        async with aclosing(store.watch("/k/", 2)) as events:  # the history kept, as it was
            assert [await anext(events) for _ in range(3)] == [
                Event(EventType.ADDED, "/k/c", b"c1", 3),
                Event(EventType.MODIFIED, "/k/b", b"b2", 4),
                Event(EventType.DELETED, "/k/c", b"c1", 5),
            ]
        assert await store.update("/k/a", b"a2", 1) == 6
        await store.compact(6)
        assert await store.get("/k/b") == Record("/k/b", b"b2", 4)
        assert await store.get("/k/a") == Record("/k/a", b"a2", 6)
    finally:
        await store.close()
    columns = sqlite3.connect(path).execute("PRAGMA table_info(kv)").fetchall()
    assert [c[1] for c in columns] == ["key", "revision"]
