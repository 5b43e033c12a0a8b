"""Store throughput: creates/s, gets/s, list-of-10k latency, watch events/s, and this
process's CPU per concurrent create and update.

Runs against SQLite (a WAL file in a temp dir) and a single-member etcd that it
starts itself (data dir on disk in a temp dir, so WAL fsyncs are real). An
application with its scheduler's explanation is 4–5 KB: ``--value-bytes 4500``.

    .venv/bin/python bench/store.py [--n 10000] [--concurrency 256] [--value-bytes 1024]
        [--store sqlite,etcd]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shoal.store.base import Store
from shoal.store.etcd import EtcdStore
from shoal.store.sqlite import SqliteStore
from tests.fixtures.etcd import running_etcd


async def bounded(n: int, concurrency: int, op: Callable[[int], Awaitable[object]]) -> float:
    """Run op(0..n-1) with at most ``concurrency`` in flight; seconds taken."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < n:
            i = next_index
            next_index += 1
            await op(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
    return time.perf_counter() - start


async def _events(store: Store, prefix: str, revision: int, count: int) -> None:
    """Watch ``prefix`` from ``revision`` until ``count`` events have come."""
    seen = 0
    async with aclosing(store.watch(prefix, revision)) as events:
        async for _ in events:
            seen += 1
            if seen == count:
                return


async def bench(name: str, store: Store, n: int, concurrency: int, value: bytes) -> None:
    prefix = f"/bench/{time.monotonic_ns()}/"
    keys = [f"{prefix}{i:07d}" for i in range(n)]
    start_revision = await store.revision()

    sequential = min(n, 1000)
    t_seq = await bounded(sequential, 1, lambda i: store.create(keys[i], value))
    cpu = time.process_time()
    t_conc = await bounded(
        n - sequential, concurrency, lambda i: store.create(keys[sequential + i], value)
    )
    cpu_create = (time.process_time() - cpu) / (n - sequential)
    t_get_seq = await bounded(sequential, 1, lambda i: store.get(keys[i]))
    t_get = await bounded(n, concurrency, lambda i: store.get(keys[i]))

    list_times = []
    for _ in range(5):
        t0 = time.perf_counter()
        records, _ = await store.list(prefix)
        list_times.append(time.perf_counter() - t0)
        assert len(records) == n
    page_times = []
    t0 = time.perf_counter()
    after: str | None = None
    while True:
        page, _ = await store.list(prefix, start_after=after, limit=500)
        if not page:
            break
        after = page[-1].key
        page_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()

    # Replay: all n ADDED events out of history.
    t0 = time.perf_counter()
    await _events(store, prefix, start_revision, n)
    t_replay = time.perf_counter() - t0

    # Live: a watcher receiving concurrent updates as they are written.
    head = await store.revision()
    live = min(n, 5000)

    t0 = time.perf_counter()
    consumer = asyncio.create_task(_events(store, prefix, head, live))
    await bounded(live, concurrency, lambda i: store.update(keys[i], value))
    await consumer
    t_live = time.perf_counter() - t0
    cpu = time.process_time()
    await bounded(n, concurrency, lambda i: store.update(keys[i], value))
    cpu_update = (time.process_time() - cpu) / n

    print(f"\n{name}  (n={n}, value={len(value)} B, concurrency={concurrency})")
    print(
        f"  creates/s   sequential {sequential / t_seq:9.0f}   "
        f"concurrent {(n - sequential) / t_conc:9.0f}"
    )
    print(
        f"  CPU per write (this process, concurrent)   create {cpu_create * 1e6:6.1f} µs   "
        f"update {cpu_update * 1e6:6.1f} µs"
    )
    print(f"  gets/s      sequential {sequential / t_get_seq:9.0f}   concurrent {n / t_get:9.0f}")
    print(
        f"  list {n} keys   p50 {statistics.median(list_times) * 1000:7.1f} ms   "
        f"min {min(list_times) * 1000:7.1f} ms   "
        f"(pages of 500: {statistics.median(page_times) * 1000:.1f} ms each)"
    )
    print(
        f"  watch events/s   replay {n / t_replay:9.0f}   live (with writes) {live / t_live:9.0f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--store", default="sqlite,etcd", help="sqlite, etcd or both")
    args = parser.parse_args()
    value = b"x" * args.value_bytes
    stores = args.store.split(",")

    with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmp:
        if "sqlite" in stores:
            sqlite = SqliteStore(str(Path(tmp) / "store.db"))
            try:
                await bench("sqlite (WAL file)", sqlite, args.n, args.concurrency, value)
            finally:
                await sqlite.close()
        if "etcd" not in stores:
            return
        with running_etcd(Path(tmp) / "etcd") as server:
            etcd = EtcdStore.from_url(server.url)
            try:
                await bench(f"etcd 1 member ({server.url})", etcd, args.n, args.concurrency, value)
            finally:
                await etcd.close()


if __name__ == "__main__":
    asyncio.run(main())
