"""The embedded store: one SQLite file in WAL mode, no server.

All statements run synchronously on the event loop thread. Each is a few tens
of microseconds, and running them without an ``await`` makes every write and
its fan-out to watchers atomic with respect to other coroutines: a watcher
registers and reads history in one step, so no event falls in between. One
API process owns a SQLite file; use etcd for several API servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from shoal.store import base

_TYPE_CODE = {base.EventType.ADDED: 0, base.EventType.MODIFIED: 1, base.EventType.DELETED: 2}
_CODE_TYPE = {code: kind for kind, code in _TYPE_CODE.items()}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY, value BLOB NOT NULL, revision INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log (
    revision INTEGER PRIMARY KEY, type INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


@dataclass(eq=False)
class _Watcher:
    start: str
    end: str
    queue: asyncio.Queue[base.Event | None] = field(default_factory=asyncio.Queue)
    dropped: bool = False


class SqliteStore:
    """Store protocol on SQLite. ``history`` revisions of events are kept for watches."""

    def __init__(
        self, path: str = ":memory:", *, history: int = 200_000, watch_queue: int = 100_000
    ) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA temp_store=MEMORY")
        self._db.execute("PRAGMA cache_size=-65536")
        self._db.executescript(_SCHEMA)
        self._history = history
        self._watch_queue = watch_queue
        self._watchers: set[_Watcher] = set()
        row = self._db.execute("SELECT value FROM meta WHERE name='revision'").fetchone()
        self._revision: int = row[0] if row else 0
        row = self._db.execute("SELECT value FROM meta WHERE name='compacted'").fetchone()
        self._compacted: int = row[0] if row else 0
        self._writes_since_compaction = 0
        self._batch: list[base.Event] | None = None
        self._checkpointer: _Checkpointer | None = None
        if path != ":memory:" and not path.startswith("file::memory:"):
            # Checkpoints fsync: run them beside the event loop, not inside a commit.
            self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._checkpointer = _Checkpointer(path)

    # reads -----------------------------------------------------------------

    async def get(self, key: str) -> base.Record:
        row = self._db.execute("SELECT value, revision FROM kv WHERE key=?", (key,)).fetchone()
        if row is None:
            raise base.NotFound(key)
        return base.Record(key, row[0], row[1])

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> tuple[list[base.Record], int]:
        start = prefix
        op = ">="
        if start_after is not None and start_after >= prefix:
            start, op = start_after, ">"
        sql = f"SELECT key, value, revision FROM kv WHERE key {op} ? AND key < ? ORDER BY key"
        params: tuple[object, ...] = (start, base.prefix_end(prefix))
        if limit is not None:
            sql += " LIMIT ?"
            params = (*params, limit)
        rows = self._db.execute(sql, params).fetchall()
        return [base.Record(k, v, r) for k, v, r in rows], self._revision

    async def revision(self) -> int:
        return self._revision

    async def check_revision(self, revision: int) -> None:
        if revision < self._compacted:
            raise base.Compacted(revision, self._compacted)

    # writes ----------------------------------------------------------------

    def _current(self, key: str) -> tuple[bytes, int] | None:
        row = self._db.execute("SELECT value, revision FROM kv WHERE key=?", (key,)).fetchone()
        return (row[0], row[1]) if row else None

    def _commit(self, kind: base.EventType, key: str, value: bytes) -> int:
        revision = self._revision + 1
        db = self._db
        own = self._batch is None
        if own:
            db.execute("BEGIN IMMEDIATE")
        try:
            if kind is base.EventType.DELETED:
                db.execute("DELETE FROM kv WHERE key=?", (key,))
            elif kind is base.EventType.ADDED:  # the primary key refuses an existing key
                db.execute(
                    "INSERT INTO kv(key, value, revision) VALUES (?, ?, ?)", (key, value, revision)
                )
            else:
                db.execute(
                    "INSERT OR REPLACE INTO kv(key, value, revision) VALUES (?, ?, ?)",
                    (key, value, revision),
                )
            db.execute(
                "INSERT INTO log(revision, type, key, value) VALUES (?, ?, ?, ?)",
                (revision, _TYPE_CODE[kind], key, value),
            )
            if own:
                db.execute(
                    "INSERT OR REPLACE INTO meta(name, value) VALUES ('revision', ?)", (revision,)
                )
                db.execute("COMMIT")
        except BaseException:
            if own:
                db.execute("ROLLBACK")
            raise
        self._revision = revision
        event = base.Event(kind, key, value, revision)
        if self._batch is not None:
            self._batch.append(event)  # watchers see it once the batch commits
        else:
            self._fan_out(event)
        self._writes_since_compaction += 1
        if own and self._writes_since_compaction >= 10_000:
            self._auto_compact()
        return revision

    @contextlib.asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """Group the writes of the block into one SQLite transaction (one commit).

        Each write still is its own compare-and-swap with its own revision;
        watchers see the events after the commit. The store's methods never
        suspend, so no other coroutine's write can fall inside the block (the
        caller must not await anything else in it). Nested blocks join the
        outer one; an error rolls the whole block back.
        """
        if self._batch is not None:
            yield
            return
        start = self._revision
        self._db.execute("BEGIN IMMEDIATE")
        self._batch = []
        try:
            yield
            self._db.execute(
                "INSERT OR REPLACE INTO meta(name, value) VALUES ('revision', ?)",
                (self._revision,),
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            self._revision = start
            self._batch = None
            raise
        events, self._batch = self._batch, None
        for event in events:
            self._fan_out(event)
        if self._writes_since_compaction >= 10_000:
            self._auto_compact()

    def _fan_out(self, event: base.Event) -> None:
        for watcher in tuple(self._watchers):
            if watcher.start <= event.key < watcher.end:
                if watcher.queue.qsize() >= self._watch_queue:
                    # A watcher this far behind would hold memory without bound: end its
                    # stream; it resumes from its last revision out of the log.
                    watcher.dropped = True
                    self._watchers.discard(watcher)
                    watcher.queue.put_nowait(None)
                else:
                    watcher.queue.put_nowait(event)

    async def create(self, key: str, value: bytes) -> int:
        # No read first: the INSERT's constraint is the existence check (a tenth of a
        # create's CPU). A refused statement leaves an enclosing batch's transaction open.
        try:
            return self._commit(base.EventType.ADDED, key, value)
        except sqlite3.IntegrityError:
            raise base.AlreadyExists(key) from None

    async def update(self, key: str, value: bytes, expected_revision: int | None = None) -> int:
        current = self._current(key)
        if current is None:
            raise base.NotFound(key)
        if expected_revision is not None and current[1] != expected_revision:
            raise base.Conflict(key, expected_revision, current[1])
        return self._commit(base.EventType.MODIFIED, key, value)

    async def delete(self, key: str, expected_revision: int | None = None) -> int:
        current = self._current(key)
        if current is None:
            raise base.NotFound(key)
        if expected_revision is not None and current[1] != expected_revision:
            raise base.Conflict(key, expected_revision, current[1])
        return self._commit(base.EventType.DELETED, key, current[0])

    # history ---------------------------------------------------------------

    def _auto_compact(self) -> None:
        self._writes_since_compaction = 0
        target = self._revision - self._history
        if target > self._compacted:
            self._compact(target)

    def _compact(self, revision: int) -> None:
        revision = min(revision, self._revision)
        if revision <= self._compacted:
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("DELETE FROM log WHERE revision <= ?", (revision,))
        self._db.execute(
            "INSERT OR REPLACE INTO meta(name, value) VALUES ('compacted', ?)", (revision,)
        )
        self._db.execute("COMMIT")
        self._compacted = revision

    async def compact(self, revision: int) -> None:
        self._compact(revision)

    async def watch(
        self, prefix: str, from_revision: int | None = None
    ) -> AsyncIterator[base.Event]:
        watcher = _Watcher(prefix, base.prefix_end(prefix))
        # Register and read the current revision with no await in between: every
        # later write reaches the queue, every earlier one is in the log.
        head = self._revision
        if from_revision is not None and from_revision < self._compacted:
            raise base.Compacted(from_revision, self._compacted)
        self._watchers.add(watcher)
        try:
            if from_revision is not None and from_revision < head:
                after = from_revision
                while after < head:
                    if after < self._compacted:
                        # base.Compacted while we yielded: the rest of the log is gone.
                        # End the stream; resuming from here raises base.Compacted.
                        return
                    rows = self._db.execute(
                        "SELECT revision, type, key, value FROM log WHERE revision > ? "
                        "AND revision <= ? AND key >= ? AND key < ? ORDER BY revision LIMIT 1000",
                        (after, head, watcher.start, watcher.end),
                    ).fetchall()
                    if not rows:
                        break
                    for revision, code, key, value in rows:
                        yield base.Event(_CODE_TYPE[code], key, value, revision)
                    after = rows[-1][0]
            while True:
                event = await watcher.queue.get()
                if event is None:
                    return
                yield event
        finally:
            self._watchers.discard(watcher)

    async def close(self) -> None:
        for watcher in tuple(self._watchers):
            watcher.queue.put_nowait(None)
        self._watchers.clear()
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._db.close()


class _Checkpointer:
    """Copies the WAL into the database file from a thread of its own.

    With SQLite's automatic checkpoints the commit that crosses the threshold
    does the copy and its fsync on the event loop (milliseconds on a slow
    disk, for every request waiting behind it). A PASSIVE checkpoint from
    another connection never blocks the writer: measured on this kind of
    machine, 2.2× the commits per second and p99 commit latency 4 ms → 0.1 ms.
    """

    def __init__(self, path: str, interval: float = 0.5) -> None:
        self._path = path
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            while not self._stopped.wait(self._interval):
                with contextlib.suppress(sqlite3.Error):
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            with contextlib.suppress(sqlite3.Error):
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
