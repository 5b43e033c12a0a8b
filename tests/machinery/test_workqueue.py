"""The work queue: one idle worker woken per key, timers served while every worker idles,
per-key back-off on a clock the test moves."""

from __future__ import annotations

import asyncio

import pytest

from shoal.machinery.backoff import Backoff
from shoal.machinery.workqueue import WorkQueue
from tests.util import wait_for


async def _workers(queue: WorkQueue[str], n: int, got: list[str]) -> list[asyncio.Task[None]]:
    async def work() -> None:
        while True:
            key = await queue.get()
            got.append(key)
            queue.done(key)

    tasks = [asyncio.create_task(work()) for _ in range(n)]
    await asyncio.sleep(0.01)  # all idle
    return tasks


async def _stop(queue: WorkQueue[str], tasks: list[asyncio.Task[None]]) -> None:
    queue.close()
    _, pending = await asyncio.wait(tasks, timeout=1)
    assert not pending, "close() must end every idle worker"


async def test_each_key_processed_once_by_many_idle_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str] = []
    tasks = await _workers(queue, 50, got)
    for i in range(200):
        queue.add(f"k{i}")
        if i % 7 == 0:
            await asyncio.sleep(0)
    await wait_for(lambda: len(got) >= 200, timeout=10, message="every key processed")
    await asyncio.sleep(0.01)  # a key processed twice would show now
    assert sorted(got) == sorted(f"k{i}" for i in range(200))
    await _stop(queue, tasks)


async def test_timers_fire_while_all_workers_idle() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str] = []
    tasks = await _workers(queue, 8, got)
    queue.add_after("late", 0.3)
    queue.add_after("early", 0.05)  # earlier than the deadline an idle worker waits for
    await wait_for(lambda: got, timeout=10, message="the early timer")
    assert got[0] == "early"
    queue.add("now")  # takes the worker that waited for the timers away
    await wait_for(lambda: len(got) == 3, timeout=10, message="the late timer too")
    assert got[0] == "early" and sorted(got) == ["early", "late", "now"]
    await _stop(queue, tasks)


async def test_cancelled_idle_worker_passes_its_wake_on() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str] = []
    tasks = await _workers(queue, 2, got)
    queue.add("a")  # wakes the first idle worker...
    tasks[0].cancel()  # ...which is cancelled before it runs
    await wait_for(lambda: got, timeout=10, message="the key taken by another worker")
    assert got == ["a"]
    await _stop(queue, tasks[1:])


async def test_one_key_wakes_one_idle_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    looks = 0
    release = queue._release_timers

    def counted() -> float | None:
        nonlocal looks
        looks += 1
        return release()

    queue._release_timers = counted  # type: ignore[method-assign]
    got: list[str] = []
    tasks = await _workers(queue, 50, got)
    looks = 0
    queue.add("a")
    await wait_for(lambda: got, timeout=10, message="the key processed")
    await asyncio.sleep(0.01)  # other woken workers would look now
    assert got == ["a"]
    assert looks <= 3, f"{looks} idle workers looked at the queue for one key"
    await _stop(queue, tasks)


def test_add_after_keeps_the_earliest_time_unless_told_to_replace_it() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("k", 1.0)
    first = queue.deadline("k")
    assert first is not None
    queue.add_after("k", 60.0)  # a later request never postpones an earlier one
    assert queue.deadline("k") == first
    queue.add_after("k", 60.0, replace=True)  # the worker brought it to rest
    later = queue.deadline("k")
    assert later is not None and later > first + 50
    queue.add_after("k", 0.5, replace=True)  # an earlier one still wins
    again = queue.deadline("k")
    assert again is not None and again < first


async def test_a_replaced_time_adds_the_key_only_at_its_new_time() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str] = []
    tasks = await _workers(queue, 2, got)
    queue.add_after("moved", 0.05)
    queue.add_after("moved", 0.4, replace=True)
    queue.add_after("kept", 0.1)
    await wait_for(lambda: got == ["kept"], timeout=5, message="the timer that was kept")
    assert "moved" not in got  # its first time has passed: replaced, not served
    await wait_for(lambda: got == ["kept", "moved"], timeout=5, message="the new time")
    await _stop(queue, tasks)


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("base", "cap", "factor", "failures", "delay"),
    [
        (1.0, 60.0, 2.0, 0, 1.0),  # no failure yet: the base
        (1.0, 60.0, 2.0, 1, 1.0),
        (1.0, 60.0, 2.0, 2, 2.0),
        (1.0, 60.0, 2.0, 6, 32.0),
        (1.0, 60.0, 2.0, 7, 60.0),  # 64 capped
        (1.0, 60.0, 2.0, 5000, 60.0),  # past a float's range: still the cap
        (0.5, 10.0, 3.0, 3, 4.5),
        (2.0, 2.0, 1.0, 9, 2.0),  # factor 1: a constant delay
        (30.0, 5.0, 2.0, 1, 5.0),  # a cap below the base: every wait
        (30.0, 5.0, 2.0, 4, 5.0),
    ],
)
def test_backoff_delay_grows_by_its_factor_up_to_its_cap(
    base: float, cap: float, factor: float, failures: int, delay: float
) -> None:
    assert Backoff(base, cap, factor).delay(failures) == delay


@pytest.mark.parametrize(
    ("base", "cap", "factor"), [(0.0, 1.0, 2.0), (1.0, 0.0, 2.0), (1.0, 2.0, 0.5)]
)
def test_backoff_refuses_parameters_that_never_wait_or_shrink(
    base: float, cap: float, factor: float
) -> None:
    with pytest.raises(ValueError, match="back-off needs"):
        Backoff(base, cap, factor)


def test_a_retry_loop_counts_its_failures_and_starts_over_on_success() -> None:
    backoff = Backoff(0.5, 4.0)
    assert backoff.current == 0.5
    assert [backoff.failed() for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert backoff.current == 4.0
    backoff.succeeded()
    assert backoff.failed() == 0.5


@pytest.mark.parametrize(
    ("steps", "next_in", "failures"),
    [
        # each step: "fail" (add_rate_limited) or "forget"; then where the key's
        # next add stands, in seconds from now, and its failures in a row
        (["fail"], 10.0, 1),
        (["fail", "fail"], 10.0, 2),  # the earlier deadline (10 s) holds...
        (["fail", "forget"], 10.0, 0),  # forget keeps the pending add, clears the count
        (["forget"], None, 0),
    ],
)
def test_rate_limited_adds_wait_their_back_off(
    steps: list[str], next_in: float | None, failures: int
) -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(Backoff(10.0, 300.0), clock=clock)
    for step in steps:
        if step == "fail":
            queue.add_rate_limited("k")
        else:
            queue.forget("k")
    deadline = queue.deadline("k")
    assert (None if deadline is None else deadline - clock.now) == next_in
    assert queue.failures("k") == failures


async def test_each_failure_in_a_row_waits_longer_until_the_cap() -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(Backoff(10.0, 50.0), clock=clock)
    waited: list[float] = []
    for _ in range(5):
        delay = queue.add_rate_limited("k")
        deadline = queue.deadline("k")
        assert deadline == clock.now + delay
        assert len(queue) == 0  # not before its time
        clock.now = deadline  # its time comes
        assert await queue.get() == "k"
        queue.done("k")
        waited.append(delay)
    assert waited == [10.0, 20.0, 40.0, 50.0, 50.0]
    queue.forget("k")  # it succeeded: the next failure starts over
    assert queue.add_rate_limited("k") == 10.0
    assert queue.failures("other") == 0  # each key counts its own


async def test_a_key_failing_while_held_is_not_worked_twice_at_once() -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(Backoff(5.0, 60.0), clock=clock)
    queue.add("k")
    assert await queue.get() == "k"
    queue.add("k")  # an event while a worker holds it: marked, not queued
    assert len(queue) == 0 and queue.in_progress == 1
    queue.done("k")  # the worker lets go: now it is queued again
    assert len(queue) == 1
    assert await queue.get() == "k"
    queue.add_rate_limited("k")
    queue.done("k")
    assert len(queue) == 0 and queue.deadline("k") == clock.now + 5.0
    clock.now += 5.0
    assert await queue.get() == "k"


@pytest.mark.parametrize(
    ("added", "order"),
    [
        ([("b", 2), ("a", 1), ("c", 3)], ["a", "b", "c"]),  # lowest priority value first
        ([("x", 1), ("y", 1), ("z", 0)], ["z", "x", "y"]),  # ties: first come first
    ],
)
def test_a_priority_orders_the_ready_keys(added: list[tuple[str, int]], order: list[str]) -> None:
    priority = dict(added)
    queue: WorkQueue[str] = WorkQueue(priority=priority.__getitem__)
    for key, _ in added:
        queue.add(key)
    assert [queue.get_nowait() for _ in order] == order
    assert queue.get_nowait() is None


def test_a_cancelled_key_is_not_added_at_its_time() -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(Backoff(1.0, 8.0), clock=clock)
    queue.add_rate_limited("gone")
    queue.add_after("kept", 1.0)
    assert queue.pending("gone") and queue.failures("gone") == 1
    queue.cancel("gone")
    assert not queue.pending("gone") and queue.failures("gone") == 0
    clock.now += 1.0
    assert queue.get_nowait() == "kept"
    assert queue.get_nowait() is None
