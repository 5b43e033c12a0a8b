"""Warnings with their numbers: a placement that gives up, a deployment that fails."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.client.rest import ShoalClient
from shoal.events.recorder import KIND_LABEL, NAME_LABEL
from shoal.kube.controller import KubeController
from shoal.model.events import Event
from shoal.model.kubernetes import Application
from shoal.model.scheduler_config import Backoff, SchedulerConfig
from shoal.scheduler.scheduler import Scheduler
from shoal.testing.builders import app, cluster, register
from shoal.testing.shipped import Callers
from shoal.testing.wait import wait_for

pytestmark = pytest.mark.integration

CONFIG = SchedulerConfig(retries=2, backoff=Backoff(initial=0.1), reschedule_after=30)


def application(name: str, labels: list[str]) -> Application:
    return app(name, labels)


async def reasons_of(client: ShoalClient, name: str) -> dict[str, Event]:
    selector = f"{KIND_LABEL}=Application,{NAME_LABEL}={name}"
    return {e.reason: e for e in (await client.list(Event, label_selector=selector)).items}


async def test_failed_placement_and_deployment(client: ShoalClient, client_of: Callers) -> None:
    # The cluster's kubeconfig leads nowhere: deploying there fails.
    await register(client, cluster("far", labels={"zone": "z1"}))
    components: list[Any] = [
        Scheduler(client_of("scheduler"), CONFIG),
        KubeController(client_of("kube-controller"), timeout=0.5),
    ]
    for component in components:
        events = getattr(component, "events", None) or component.apps_handler.events
        events.interval = 0.1
        await component.start()
    try:
        await client.create(application("nowhere", ["zone is z9"]))
        await client.create(application("there", ["zone is z1"]))

        async def told(name: str, *wanted: str) -> dict[str, Event] | None:
            found = await reasons_of(client, name)
            return found if all(r in found for r in wanted) else None

        nowhere = await wait_for(lambda: told("nowhere", "Unschedulable", "Failed"), timeout=15)
        retry = nowhere["Unschedulable"].message
        assert retry.startswith("No cluster fits, retry 1/2 in 0.1 s: 0/1 clusters available: ")
        assert "label" in retry, retry
        assert nowhere["Failed"].type == "Warning"
        assert nowhere["Failed"].message.startswith("No cluster available after 2 attempts: 0/1")
        there = await wait_for(lambda: told("there", "Scheduled", "DeployFailed"), timeout=15)
        failed = there["DeployFailed"]
        assert failed.type == "Warning" and failed.reporting_component == "kube-controller"
        assert failed.message.startswith(
            ("CLUSTER_NOT_REACHABLE (attempt ", "CREATE_FAILED (attempt ")
        )
    finally:
        for component in components:
            await component.stop()
            await component.client.close()
