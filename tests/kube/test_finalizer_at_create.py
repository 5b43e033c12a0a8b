"""The kube controller on an API that gives applications its finalizer at creation
(``shoal api --kube-finalizer``, as ``shoal up`` runs it): it deploys without a finalizer
write of its own, and still removes the finalizer of every application deleted, deployed
or never placed, after its copies are gone from the member clusters."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.model.kubernetes import KUBE_FINALIZER, Application, ApplicationState, Cluster
from shoal.scheduler.scheduler import Scheduler
from shoal.testing.shipped import Callers
from tests.kube.conftest import NS, application
from tests.scheduler.helpers import fast_config
from tests.util import until_gone, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def api_options() -> dict[str, Any]:
    """The suite's API, with the kube controller's finalizer given at creation."""
    return {"kube_finalizer": True}


@pytest.fixture
async def running(
    client: ShoalClient, client_of: Callers, clusters: list[Cluster]
) -> AsyncIterator[None]:
    controller = KubeController(client_of("kube-controller"), poll_interval=0.2, timeout=2.0)
    scheduler = Scheduler(client_of("scheduler"), fast_config())
    await controller.start()
    await scheduler.start()
    try:
        yield
    finally:
        await scheduler.stop()
        await controller.stop()


async def _deployment_on(kube: KubeCluster, name: str) -> bool:
    found = await kube.read(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}, NS
    )
    return found is not None


async def test_deployed_without_a_finalizer_write_and_cleaned_up(
    client: ShoalClient, kube: dict[str, KubeCluster], running: None
) -> None:
    start = (await client.list(Application, NS)).revision
    await client.create(application("web", labels=["location is FR"]))

    # every version of the application, from its creation until it runs
    versions: list[Application] = []
    async with asyncio.timeout(20):
        async for event in client.watch(Application, NS, resource_version=start):
            if event.object.metadata.name == "web":
                versions.append(event.object)
                if event.object.status.state is ApplicationState.RUNNING:
                    break
    assert [v.metadata.finalizers for v in versions] == [[KUBE_FINALIZER]] * len(versions)
    assert versions[0].status.scheduled_to is None  # created with it, before any binding
    for before, after in itertools.pairwise(versions):
        # each write changed the status: none was the finalizer's alone
        assert before.status != after.status
    assert await _deployment_on(kube["fr"], "web")

    await client.delete(Application, "web", NS)
    await until_gone(client, Application, "web", NS, timeout=15)
    assert not await _deployment_on(kube["fr"], "web")


async def test_never_placed_application_is_removed_when_deleted(
    client: ShoalClient, running: None
) -> None:
    await client.create(application("nowhere", labels=["location is XX"]))

    async def waiting() -> bool:
        app = await client.get(Application, "nowhere", NS)
        return app.status.state is ApplicationState.FAILED or app.status.schedule_reason is not None

    await wait_for(waiting, timeout=10, message="nowhere told that no cluster fits")
    app = await client.get(Application, "nowhere", NS)
    assert app.status.scheduled_to is None and app.metadata.finalizers == [KUBE_FINALIZER]

    await client.delete(Application, "nowhere", NS)
    await until_gone(client, Application, "nowhere", NS, timeout=15)
