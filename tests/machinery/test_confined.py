"""Confined workers: limits that hold, workers replaced when they end, nothing to read or
reach from inside, and a call that costs a round trip once the worker is warm."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator

import pytest

from shoal.machinery.confined import (
    CALLER,
    WorkerDied,
    WorkerError,
    Workers,
    WorkersBusy,
    WorkerTimeout,
)

TASKS = "tests.machinery.confined_tasks"
FUNCTIONS = [f"{TASKS}:{name}" for name in
             ("echo", "spin", "allocate", "end", "read_file", "connect", "whoami")]  # fmt: skip


@pytest.fixture
def workers() -> Iterator[Workers]:
    pool = Workers(FUNCTIONS, size=1, timeout=3.0, cpu_seconds=2, memory_bytes=512 << 20)
    yield pool
    pool.close()


def call(pool: Workers, name: str, argument: object = None) -> object:
    return pool.call_blocking(f"{TASKS}:{name}", argument)


def test_a_call_runs_in_a_warm_worker(workers: Workers) -> None:
    assert call(workers, "echo", {"a": [1, "x"]}) == {"a": [1, "x"]}
    first = call(workers, "whoami")
    assert call(workers, "whoami") == first  # the same process answers again
    assert workers.started == 1
    with pytest.raises(WorkerError, match="no function"):
        workers.call_blocking("os:system", "true")  # only the functions it was made with


def test_an_endless_call_is_stopped_and_its_worker_replaced(workers: Workers) -> None:
    before = call(workers, "whoami")
    with pytest.raises(WorkerTimeout):
        call(workers, "spin")
    after = call(workers, "whoami")
    assert after["pid"] != before["pid"]  # type: ignore[index]
    assert workers.started == 2


def test_the_wall_clock_stops_a_worker_the_cpu_limit_does_not_see() -> None:
    pool = Workers(FUNCTIONS, size=1, timeout=0.5, cpu_seconds=60)
    try:
        call(pool, "echo", 1)
        with pytest.raises(WorkerTimeout, match="in time"):
            call(pool, "spin")
        assert call(pool, "echo", 2) == 2
        assert pool.started == 2
    finally:
        pool.close()


def test_memory_beyond_the_cap_ends_the_worker_which_is_replaced(workers: Workers) -> None:
    with pytest.raises(WorkerDied):
        call(workers, "allocate", 1024)
    assert call(workers, "allocate", 16) == 16 << 20
    assert workers.started == 2


def test_a_worker_that_dies_is_replaced(workers: Workers) -> None:
    with pytest.raises(WorkerDied, match="status 7"):
        call(workers, "end")
    assert call(workers, "echo", "again") == "again"


@pytest.mark.skipif(os.geteuid() != 0, reason="all of the confinement needs root")
def test_the_worker_reads_no_file_and_reaches_no_host(workers: Workers) -> None:
    identity = call(workers, "whoami")
    assert {"network namespace", "empty root", "user nobody", "RLIMIT_NOFILE"} <= set(
        workers.enforced
    )
    assert identity["uid"] == 65534 and identity["sees_etc"] is False  # type: ignore[index]
    with pytest.raises(WorkerError, match="OSError"):
        call(workers, "read_file", "/etc/passwd")
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    try:
        with pytest.raises(WorkerError):
            call(workers, "connect", server.getsockname()[1])
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


def test_the_worker_has_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_SECRET", "kept-here")
    pool = Workers([f"{TASKS}:environment"], size=1)
    try:
        assert "SHOAL_SECRET" not in call(pool, "environment")  # type: ignore[operator]
    finally:
        pool.close()


def test_a_warm_call_costs_a_round_trip(workers: Workers) -> None:
    call(workers, "echo", 0)
    started = time.perf_counter()
    for index in range(200):
        call(workers, "echo", {"index": index})
    per_call = (time.perf_counter() - started) / 200
    assert per_call < 0.05, per_call  # a process start is ~0.3 s; a round trip ~0.1 ms


def test_a_worker_that_cannot_start_says_so() -> None:
    pool = Workers(["tests.machinery.no_such_module:echo"], size=1)
    try:
        with pytest.raises(WorkerError, match="could not start") as failed:
            pool.call_blocking("tests.machinery.no_such_module:echo", 1)
        assert not isinstance(failed.value, WorkerTimeout | WorkerDied)
    finally:
        pool.close()


async def test_a_call_no_worker_takes_within_its_timeout_never_runs() -> None:
    """Calls queued behind every one sent before them, each up to its timeout: a call that
    waited its whole timeout for a worker is refused (``WorkersBusy``) and never runs."""
    pool = Workers([f"{TASKS}:nap"], size=1, timeout=2.0)
    try:
        naps = [pool.call(f"{TASKS}:nap", 1.5) for _ in range(4)]
        results = await asyncio.gather(*naps, return_exceptions=True)
    finally:
        pool.close()
    assert results[0] == 1.5, results  # the first and perhaps the second ran
    # the third waited at least 3 s (two naps) of its 2: refused, and so the fourth
    assert [type(r) for r in results[2:]] == [WorkersBusy, WorkersBusy], results
    assert pool.calls <= 2


async def test_a_caller_s_calls_go_one_after_the_other() -> None:
    """One caller holds one worker at most: its next call waits for its last, and past the
    timeout is refused, while another caller is served."""
    pool = Workers([f"{TASKS}:nap"], size=2, timeout=10.0)

    async def as_caller(name: str, seconds: float) -> object:
        CALLER.set(name)
        return await pool.call(f"{TASKS}:nap", seconds)

    try:
        first = asyncio.create_task(as_caller("alice", 1.0))
        await asyncio.sleep(0)  # alice's first call holds her turn
        assert await as_caller("alice", 0.0) == 0.0
        assert first.done() and first.result() == 1.0  # her second waited for her first
        assert await as_caller("bob", 0.0) == 0.0
    finally:
        pool.close()
    pool = Workers([f"{TASKS}:nap"], size=2, timeout=1.0)
    try:
        endless = asyncio.create_task(as_caller("alice", 5.0))  # stopped at 1 s
        await asyncio.sleep(0.05)
        endless.cancel()  # she stops waiting (a dropped request): her call still runs
        with pytest.raises(WorkersBusy, match="no worker was free for alice"):
            await as_caller("alice", 0.0)  # a worker was free, but not her turn
        assert await as_caller("bob", 0.0) == 0.0
    finally:
        pool.close()
