"""The work queue: one idle worker woken per key, timers served while every worker idles."""

from __future__ import annotations

import asyncio

from shoal.controllers.queue import WorkQueue
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
