"""One SQLite file, several processes: do writes or reads scale with processes?

The API's SQLite store is one process: it assigns revisions and feeds watches
from its own memory. This bench measures what more processes on the same file
would give, on the store's own schema and statements, without Shoal around them:

- **writers**: P processes write W values in all, in transactions of G writes
  (the API's group commit under load). Each transaction takes SQLite's write
  lock (``BEGIN IMMEDIATE``), reads the revision, writes its keys and log rows,
  stores the revision and commits. Printed: writes per second, CPU per write
  (the processes' CPU summed), and how long a transaction waited for the lock.
- **readers**: one process writes flat out as above while R processes read
  values by key, as a read-only replica behind ``SO_REUSEPORT`` would. Printed:
  reads per second and CPU per read, and the writer's writes per second.

    .venv/bin/python bench/sqlite_processes.py [--writes 40000] [--group 25]
        [--value-bytes 3300] [--processes 1,2,4] [--seconds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shoal.store.sqlite import _GET, _SCHEMA

Result = dict[str, float]


def connect(path: str) -> sqlite3.Connection:
    """A connection set up as the store sets up its own (WAL, synchronous=NORMAL)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA cache_size=-65536")
    return db


def prepare(path: str) -> None:
    db = connect(path)
    db.executescript(_SCHEMA)
    db.execute("INSERT OR REPLACE INTO meta(name, value) VALUES ('revision', 0)")
    db.close()


def write(path: str, worker: int, writes: int, group: int, value: bytes, until: float) -> Result:
    """``writes`` values (or until ``until``, when given), ``group`` per transaction."""
    db = connect(path)
    waits: list[float] = []
    done = 0
    cpu0 = time.process_time()
    start, began = time.perf_counter(), time.time()
    while done < writes or (until and time.time() < until):
        asked = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")  # the write lock: one writer at a time, across processes
        waits.append(time.perf_counter() - asked)
        revision = db.execute("SELECT value FROM meta WHERE name='revision'").fetchone()[0]
        for _ in range(group):
            revision += 1
            key = f"/applications/bench/w{worker}-{done:08d}"
            db.execute("INSERT INTO kv(key, revision) VALUES (?, ?)", (key, revision))
            db.execute(
                "INSERT INTO log(revision, type, key, value) VALUES (?, 0, ?, ?)",
                (revision, key, value),
            )
            done += 1
        db.execute("UPDATE meta SET value=? WHERE name='revision'", (revision,))
        db.execute("COMMIT")
    waits.sort()
    return {
        "writes": done,
        "cpu": time.process_time() - cpu0,
        "seconds": time.perf_counter() - start,
        "began": began,
        "ended": time.time(),
        "wait_p50": waits[len(waits) // 2],
        "wait_p99": waits[int(len(waits) * 0.99)],
    }


def read(path: str, keys: list[str], until: float) -> Result:
    """Values by key, at random, until ``until``."""
    db = connect(path)
    db.execute("PRAGMA query_only=1")
    rng = random.Random(os.getpid())
    done = 0
    cpu0 = time.process_time()
    start = time.perf_counter()
    while time.time() < until:
        for _ in range(100):
            db.execute(_GET, (rng.choice(keys),)).fetchone()
        done += 100
    cpu, seconds = time.process_time() - cpu0, time.perf_counter() - start
    return {"reads": done, "cpu": cpu, "seconds": seconds}


def writers(path: str, processes: int, writes: int, group: int, value: bytes) -> Result:
    prepare(path)
    share = writes // processes
    with mp.get_context("spawn").Pool(processes) as pool:
        jobs = [(path, w, share, group, value, 0.0) for w in range(processes)]
        results = pool.starmap(write, jobs)
    # from the first writer's start to the last one's end: the workers' start-up is not timed
    seconds = max(r["ended"] for r in results) - min(r["began"] for r in results)
    total = sum(r["writes"] for r in results)
    return {
        "writes/s": total / seconds,
        "cpu_us": 1e6 * sum(r["cpu"] for r in results) / total,
        "wait_p50_ms": 1e3 * statistics.median(r["wait_p50"] for r in results),
        "wait_p99_ms": 1e3 * max(r["wait_p99"] for r in results),
    }


def readers(path: str, processes: int, group: int, value: bytes, seconds: float) -> Result:
    prepare(path)
    write(path, 99, 20_000, group, value, 0.0)  # something to read
    keys = [f"/applications/bench/w99-{i:08d}" for i in range(20_000)]
    until = time.time() + seconds
    with mp.get_context("spawn").Pool(processes + 1) as pool:
        writer = pool.apply_async(write, (path, 0, 0, group, value, until))
        got = [pool.apply_async(read, (path, keys, until)) for _ in range(processes)]
        results = [g.get() for g in got]
        written = writer.get()
    reads = sum(r["reads"] for r in results)
    return {
        "reads/s": reads / seconds,
        "cpu_us": 1e6 * sum(r["cpu"] for r in results) / reads,
        "writes/s": written["writes"] / written["seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=40_000)
    parser.add_argument("--group", type=int, default=25, help="writes per transaction")
    parser.add_argument("--value-bytes", type=int, default=3300, help="a bound application")
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=3.0, help="of each readers run")
    args = parser.parse_args()
    value = os.urandom(args.value_bytes // 2).hex().encode()[: args.value_bytes]
    counts = [int(p) for p in args.processes.split(",")]
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
        f"{args.group} writes per transaction, values of {args.value_bytes} bytes"
    )
    print(f"\n{'writers':>8} {'writes/s':>10} {'CPU µs/write':>13} {'lock wait p50 / p99 ms':>24}")
    for processes in counts:
        with tempfile.TemporaryDirectory() as tmp:
            r = writers(str(Path(tmp) / "s.db"), processes, args.writes, args.group, value)
        waits = f"{r['wait_p50_ms']:.2f} / {r['wait_p99_ms']:.1f}"
        print(f"{processes:>8} {r['writes/s']:>10,.0f} {r['cpu_us']:>13.1f} {waits:>24}")
    print(
        f"\n{'readers':>8} {'reads/s':>10} {'CPU µs/read':>13} {'writer writes/s':>16}"
        "   (one writer beside them, flat out)"
    )
    for processes in counts:
        with tempfile.TemporaryDirectory() as tmp:
            r = readers(str(Path(tmp) / "s.db"), processes, args.group, value, args.seconds)
        print(f"{processes:>8} {r['reads/s']:>10,.0f} {r['cpu_us']:>13.1f} {r['writes/s']:>16,.0f}")


if __name__ == "__main__":
    main()
