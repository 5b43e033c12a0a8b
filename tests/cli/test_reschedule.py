"""``shoal reschedule`` and ``shoal get rescheduletasks`` against a real API and controllers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from shoal.model.scheduling import RescheduleTask
from shoal.reschedule.controller import RescheduleTaskController
from shoal.scheduler.scheduler import Scheduler
from shoal.testing.shipped import Callers
from tests.cli.conftest import Shoal, ok
from tests.reschedule.test_controller import CONFIG, application, fleet
from tests.util import wait_for


@pytest.fixture
async def controllers(client: ShoalClient, client_of: Callers) -> AsyncIterator[None]:
    await fleet(client)
    started = [
        Scheduler(client_of("scheduler"), CONFIG),
        RescheduleTaskController(client_of("reschedule-controller")),
    ]
    for controller in started:
        await controller.start()
    try:
        yield
    finally:
        for controller in started:
            await controller.stop()
            await controller.client.close()


async def test_reschedule_commands(shoal: Shoal, client: ShoalClient, controllers: None) -> None:
    await client.create(application("web", tier="web"))
    await client.create(application("db", migration=False, tier="db"))

    async def placed() -> bool:
        apps = (await client.list(Application, "default")).items
        return all(a.status.scheduled_to is not None for a in apps)

    await wait_for(placed, message="apps placed")

    waited = await shoal("reschedule", "app", "web", "--name", "one", "--wait")
    ok(waited)
    assert "Successful" in waited.output and "Rescheduled" in waited.output
    assert "1/1 successful" in waited.output

    failed = await shoal("reschedule", "--cluster", "a", "--name", "two", "--wait", "-o", "json")
    assert failed.exit_code == 1, failed.output  # db is pinned
    data = json.loads(failed.stdout)  # the progress bar goes to stderr
    reasons = {t["name"]: t["reason"] for t in data["status"]["targets"]}
    assert reasons == {"web": "Rescheduled", "db": "MigrationDisabled"}

    created = ok(await shoal("reschedule", "--selector", "tier=web", "--name", "three"))
    assert "RescheduleTask three created" in created.output

    async def three_done() -> bool:
        task = await client.get(RescheduleTask, "three")
        return task.status.phase == "Finished"

    await wait_for(three_done, message="task three finished")
    table = ok(await shoal("get", "rescheduletasks"))
    lines = table.output.splitlines()
    assert lines[0].split()[:6] == ["NAME", "PHASE", "TARGETS", "SUCCESSFUL", "FAILED", "PENDING"]
    two = next(line for line in lines if line.startswith("two "))
    assert "MigrationDisabled=1" in two and "Finished" in two
    results = ok(await shoal("reschedule", "results", "three"))
    assert "web" in results.output and "db" not in results.output

    usage = await shoal("reschedule", "app")
    assert usage.exit_code != 0
