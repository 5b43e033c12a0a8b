"""RescheduleTask end to end: in-process API, scheduler and task controller."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from shoal.client.rest import NotFound, ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import (
    Application,
    Cluster,
    ClusterState,
)
from shoal.model.scheduler_config import SchedulerConfig
from shoal.model.scheduling import (
    PolicySelector,
    RescheduleTask,
    RescheduleTaskSpec,
    ResourceSelector,
    TaskPhase,
)
from shoal.reschedule.controller import RescheduleTaskController
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import shipped
from shoal.testing.builders import app, scored_clusters, set_state
from tests.util import wait_for

MANIFEST = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}]
# A scores 0.6 and B 0.4; on B, stickiness 1.0 makes B (0.4 + 1) / 2 = 0.7 > 0.6.
CONFIG = SchedulerConfig(stickiness=1.0, reschedule_after=0.2, metrics_refresh=0.5)


async def fleet(client: ShoalClient) -> None:
    await scored_clusters(client, {"a": 0.6, "b": 0.4})


def application(name: str, *, migration: bool = True, **labels: str) -> Application:
    return app(name, migration=migration, manifest=MANIFEST, metadata_labels=labels)


async def placed_on(client: ShoalClient, name: str) -> str | None:
    app = await client.get(Application, name, "default")
    return app.status.scheduled_to.name if app.status.scheduled_to else None


class Running:
    """Start and stop controllers by hand (a stop is an abrupt cancel)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.started: list[tuple[Any, ShoalClient]] = []

    async def start(self, make: Any) -> Any:
        """``make`` on a client of its own, with the identity ``shoal up`` gives it."""
        client = shipped.client(self.url, IDENTITY[make])
        controller = make(client)
        await controller.start()
        self.started.append((controller, client))
        return controller

    async def stop(self, controller: Any) -> None:
        for entry in list(self.started):
            if entry[0] is controller:
                self.started.remove(entry)
                await controller.stop()
                await entry[1].close()

    async def close(self) -> None:
        for controller, _ in list(self.started):
            await self.stop(controller)


@pytest.fixture
async def running(client: ShoalClient) -> AsyncIterator[Running]:
    await fleet(client)
    run = Running(client.url)
    try:
        yield run
    finally:
        await run.close()


def scheduler(client: ShoalClient) -> Scheduler:
    return Scheduler(client, CONFIG)


IDENTITY: dict[Any, str] = {
    scheduler: "scheduler",
    RescheduleTaskController: "reschedule-controller",
}


async def finished(client: ShoalClient, name: str) -> RescheduleTask | None:
    task = await client.get(RescheduleTask, name)
    return task if task.status.phase is TaskPhase.Finished else None


async def test_seed_story_back_to_the_primary(client: ShoalClient, running: Running) -> None:
    sched = await running.start(scheduler)
    await running.start(RescheduleTaskController)
    await client.create(application("web"))
    await wait_for(lambda: _is(client, "web", "a"), message="web on a")

    await set_state(client, "a", ClusterState.OFFLINE)
    await wait_for(lambda: _is(client, "web", "b"), message="web failed over to b")
    await set_state(client, "a", ClusterState.ONLINE)
    passes = sched.passes  # several periodic passes: stickiness keeps it on b
    await wait_for(lambda: sched.passes >= passes + 3, message="three periodic passes")
    assert await placed_on(client, "web") == "b"

    spec = RescheduleTaskSpec(
        target_ref_resource=[ResourceSelector(namespace="default", name="web")]
    )
    await client.create(RescheduleTask(metadata=Metadata(name="back"), spec=spec))
    task = await wait_for(lambda: finished(client, "back"), message="task finished")
    assert await placed_on(client, "web") == "a"
    assert (task.status.total, task.status.successful, task.status.failed) == (1, 1, 0)
    [target] = task.status.targets
    assert (target.result, target.reason, target.cluster) == ("Successful", "Rescheduled", "a")
    assert task.status.finish_time is not None
    passes = sched.passes
    await wait_for(lambda: sched.passes >= passes + 3, message="three periodic passes")
    assert await placed_on(client, "web") == "a"  # and it stays there

    # TTL 0: deleted as soon as it finished.
    spec.ttl_seconds_after_finished = 0
    await client.create(RescheduleTask(metadata=Metadata(name="gone"), spec=spec))

    async def deleted() -> bool:
        try:
            await client.get(RescheduleTask, "gone")
        except NotFound:
            return True
        return False

    await wait_for(deleted, message="task deleted by its TTL")


async def test_applications_are_followed_only_while_a_task_is_unfinished(
    client: ShoalClient, running: Running
) -> None:
    """Every application event costs the controller a decode: with no task, none reach it."""
    await running.start(scheduler)
    tasks = await running.start(RescheduleTaskController)
    await client.create(application("web"))
    await wait_for(lambda: _is(client, "web", "a"), message="web on a")
    assert tasks._apps_run is None and tasks.apps.lists == 0  # nothing listed, nothing watched

    spec = RescheduleTaskSpec(
        target_ref_resource=[ResourceSelector(namespace="default", name="web")]
    )
    await client.create(RescheduleTask(metadata=Metadata(name="once"), spec=spec))
    task = await wait_for(lambda: finished(client, "once"), message="task finished")
    assert (task.status.total, task.status.successful) == (1, 1)  # judged from the cache
    await wait_for(lambda: tasks._apps_run is None, message="applications no longer followed")
    assert tasks.apps.lists == 0  # and forgotten: a fresh cache for the next task

    await client.create(RescheduleTask(metadata=Metadata(name="twice"), spec=spec))
    task = await wait_for(lambda: finished(client, "twice"), message="second task finished")
    assert (task.status.total, task.status.successful) == (1, 1)


async def test_failures_are_reported(client: ShoalClient, running: Running) -> None:
    await running.start(scheduler)
    await running.start(RescheduleTaskController)
    await client.create(application("pinned", migration=False))
    await client.create(application("free"))
    for name in ("pinned", "free"):
        await wait_for(lambda n=name: _is(client, n, "a"), message=f"{name} on a")
    await set_state(client, "b", ClusterState.OFFLINE)
    await set_state(client, "a", ClusterState.OFFLINE)
    await wait_for(lambda: _explained(client, "free"), message="free has nowhere to go")
    spec = RescheduleTaskSpec(
        target_ref_resource=[ResourceSelector(namespace="default", name="missing")],
        target_clusters=["a"],
    )
    await client.create(RescheduleTask(metadata=Metadata(name="t"), spec=spec))
    task = await wait_for(lambda: finished(client, "t"), message="task finished")
    reasons = {t.name: (t.result, t.reason) for t in task.status.targets}
    assert reasons == {
        "missing": ("Failed", "ApplicationNotFound"),
        "pinned": ("Failed", "MigrationDisabled"),
        "free": ("Failed", "NoSuitableCluster"),
    }
    assert (task.status.total, task.status.failed, task.status.pending) == (3, 3, 0)


async def test_reschedule_subresource_only_moves_forward(client: ShoalClient) -> None:
    await fleet(client)
    app = await client.create(application("web"))
    assert app.metadata.created is not None
    path = "/kubernetes/namespaces/default/applications/web/reschedule"
    later = app.metadata.created + timedelta(seconds=5)
    data = await client.request("PUT", path, body={"requested": later.isoformat()})
    assert Application.model_validate(data).status.reschedule_requested == later
    earlier = {"requested": app.metadata.created.isoformat()}
    data = await client.request("PUT", path, body=earlier)
    assert Application.model_validate(data).status.reschedule_requested == later
    # Scheduled after the request: stamped "now" so the forced pass still happens.
    bound = await client.bind(app, Cluster.model_validate(_cluster_ref()).ref())
    assert bound.status.last_scheduled is not None
    stale = {"requested": (bound.status.last_scheduled - timedelta(seconds=1)).isoformat()}
    data = await client.request("PUT", path, body={"requested": later.isoformat()})
    assert Application.model_validate(data).status.reschedule_requested == later
    bump = bound.status.last_scheduled + timedelta(microseconds=1)
    data = await client.request("PUT", path, body={"requested": bump.isoformat()})
    assert Application.model_validate(data).status.reschedule_requested >= bump  # type: ignore[operator]
    data = await client.request("PUT", path, body=stale)
    assert Application.model_validate(data).status.reschedule_requested >= bump  # type: ignore[operator]
    with pytest.raises(NotFound):
        await client.request(
            "PUT", path.replace("/web/", "/nope/"), body={"requested": later.isoformat()}
        )


@pytest.mark.slow
@pytest.mark.timeout(400)  # its waits add up to 140 s, past the suite's 120 s
@pytest.mark.parametrize("kill", ["controller", "scheduler"])
async def test_killed_mid_task_reschedules_each_target_once(
    client: ShoalClient, running: Running, kill: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 600
    # Small stamp batches: the controller is killed while it is still stamping.
    monkeypatch.setattr("shoal.reschedule.controller._STAMP_BATCH", 5)
    sched = await running.start(scheduler)
    tasks = await running.start(RescheduleTaskController)
    for i in range(count):
        await client.create(application(f"app-{i}", tier="web"))

    async def all_placed() -> bool:
        items = (await client.list(Application, "default")).items
        return all(a.status.last_scheduled is not None for a in items)

    await wait_for(all_placed, timeout=20, message="every app placed")

    bindings: Counter[str] = Counter()
    listed = await client.list(Application, "default")
    last: dict[str, Any] = {a.metadata.name: a.status.last_scheduled for a in listed.items}

    async def count_bindings() -> None:
        async with shipped.client(client.url) as watcher:
            stream = watcher.watch(Application, "default", resource_version=listed.revision)
            async for event in stream:
                name = event.object.metadata.name
                seen = event.object.status.last_scheduled
                if seen != last.get(name):
                    bindings[name] += 1
                last[name] = seen

    counter = asyncio.create_task(count_bindings())
    spec = RescheduleTaskSpec(target_ref_policy=[PolicySelector(namespace="default")])
    await client.create(RescheduleTask(metadata=Metadata(name="all"), spec=spec))

    async def some_done() -> bool:
        return sum(bindings.values()) >= 10

    await wait_for(some_done, timeout=20, message="some targets rescheduled")
    victim = tasks if kill == "controller" else sched
    await running.stop(victim)
    at_kill = sum(bindings.values())
    assert at_kill < count, "the task finished before the kill: nothing was tested"
    await running.start(RescheduleTaskController if kill == "controller" else scheduler)

    # The work (a pass of the scheduler per target) takes what the machine gives it; once it
    # is done the task finishes on the bindings' events, well before the controller's
    # 30 s resync: a wake-up dropped on the resume path would show here.
    await wait_for(
        lambda: len(bindings) == count, timeout=90, interval=0.1, message="every target bound"
    )
    task = await wait_for(lambda: finished(client, "all"), timeout=10, message="task finished")
    assert task.status.total == count
    failed = [t for t in task.status.targets if t.result != "Successful"]
    assert task.status.successful == count, failed
    await asyncio.sleep(0.5)  # any late, duplicate binding would show now
    counter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await counter
    assert set(bindings) == {f"app-{i}" for i in range(count)}
    assert set(bindings.values()) == {1}, {k: v for k, v in bindings.items() if v != 1}


def _cluster_ref() -> dict[str, Any]:
    metadata = {"name": "a", "namespace": "default"}
    return {"api": "kubernetes", "kind": "Cluster", "metadata": metadata}


async def _is(client: ShoalClient, name: str, cluster: str) -> bool:
    return await placed_on(client, name) == cluster


async def _explained(client: ShoalClient, name: str) -> bool:
    app = await client.get(Application, name, "default")
    explanation = app.status.scheduling or {}  # a patched null "chosen" is no key at all
    return bool(explanation) and explanation.get("chosen") is None
