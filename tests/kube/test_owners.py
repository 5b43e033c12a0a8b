"""Objects in member clusters have owners: two applications never fight over one object."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.kube.owners import LABEL_NAME, LABEL_NAMESPACE, LABEL_UID, Owner, owner_of
from shoal.model.base import ReasonCode, ResourceRef
from shoal.model.events import Event
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.testing.shipped import Callers
from tests.kube.conftest import NS, deployment, gone
from tests.util import wait_for

pytestmark = pytest.mark.integration

DE = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="de")


@pytest.fixture
async def controller(
    client: ShoalClient, client_of: Callers, clusters: list[Cluster]
) -> AsyncIterator[KubeController]:
    ctl = KubeController(client_of("kube-controller"), poll_interval=0.2, resync=60.0, timeout=2.0)
    await ctl.start()
    try:
        yield ctl
    finally:
        await ctl.stop()


def shared(name: str, overwrite: bool = False) -> Application:
    """Application ``name`` whose manifest holds the Deployment ``shared``."""
    spec: dict[str, Any] = {"manifest": [deployment("shared", replicas=1)]}
    if overwrite:
        spec["conflict_resolution"] = "overwrite"
    return Application.model_validate({"metadata": {"name": name, "namespace": NS}, "spec": spec})


async def deploy(client: ShoalClient, app: Application) -> Application:
    created = await client.create(app)
    await client.bind(created, DE)
    return created


async def running(client: ShoalClient, name: str) -> bool:
    app = await client.get(Application, name, NS)
    return app.status.state is ApplicationState.RUNNING


async def refused(client: ShoalClient, name: str) -> Application | None:
    app = await client.get(Application, name, NS)
    reason = app.status.reason
    return app if reason is not None and reason.code is ReasonCode.CONFLICT else None


def owner(app: Application) -> Owner:
    assert app.metadata.uid is not None
    return Owner(NS, app.metadata.name, app.metadata.uid)


async def test_second_application_is_refused_and_overwrite_takes_over(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    de = kube["de"]
    first = await deploy(client, shared("first"))
    await wait_for(lambda: running(client, "first"), timeout=15, message="first RUNNING")
    live = await de.read(deployment("shared"), NS)
    assert live is not None
    labels = live["metadata"]["labels"]
    assert (labels[LABEL_NAMESPACE], labels[LABEL_NAME], labels[LABEL_UID]) == (
        NS,
        "first",
        first.metadata.uid,
    )
    assert owner_of(live) == owner(first)
    uid = live["metadata"]["uid"]

    # the same Deployment for a second application: refused, the owner named
    await deploy(client, shared("second"))
    second = await wait_for(lambda: refused(client, "second"), timeout=10, message="CONFLICT")
    assert second.status.reason is not None
    assert "application default/first" in second.status.reason.message
    assert second.status.state is not ApplicationState.RUNNING
    assert second.status.running_on is None

    # deleting the refused one leaves the owner's Deployment alone
    await client.delete(Application, "second", NS)
    await wait_for(lambda: gone(client, "second"), timeout=10, message="second deleted")
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == uid
    assert owner_of(live) == owner(first)
    assert await running(client, "first")

    # overwrite takes the object over; the former owner is refused from then on
    third = await deploy(client, shared("third", overwrite=True))
    await wait_for(lambda: running(client, "third"), timeout=15, message="third RUNNING")
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == uid  # taken over, not recreated
    assert owner_of(live) == owner(third)

    async def took_over() -> list[Event]:
        events = (await client.list(Event, NS)).items
        return [e for e in events if e.reason == "TookOver" and e.involved_object.name == "third"]

    (event,) = await wait_for(took_over, timeout=10, message="TookOver event")
    assert "Deployment shared from application default/first" in event.message
    loser = await wait_for(lambda: refused(client, "first"), timeout=10, message="first refused")
    assert loser.status.reason is not None
    assert "application default/third" in loser.status.reason.message

    # deleting the former owner leaves the new owner's Deployment untouched
    await client.delete(Application, "first", NS)
    await wait_for(lambda: gone(client, "first"), timeout=10, message="first deleted")
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == uid
    assert owner_of(live) == owner(third)

    # deleting the owner removes it
    await client.delete(Application, "third", NS)
    await wait_for(lambda: gone(client, "third"), timeout=10, message="third deleted")
    assert await de.read(deployment("shared"), NS) is None


async def test_an_object_without_owner_is_adopted_only_with_overwrite(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    de = kube["de"]
    await de.ensure_namespace(NS)
    made = await de.apply(deployment("shared", replicas=1), NS)  # by hand, no owner
    await deploy(client, shared("careful"))
    app = await wait_for(lambda: refused(client, "careful"), timeout=10, message="CONFLICT")
    assert app.status.reason is not None
    assert "without an owner" in app.status.reason.message
    live = await de.read(deployment("shared"), NS)
    assert live is not None and owner_of(live) is None
    await client.delete(Application, "careful", NS)
    await wait_for(lambda: gone(client, "careful"), timeout=10, message="careful deleted")
    assert await de.read(deployment("shared"), NS) is not None  # not its own: left alone

    adopter = await deploy(client, shared("adopter", overwrite=True))
    await wait_for(lambda: running(client, "adopter"), timeout=15, message="adopted")
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == made["metadata"]["uid"]
    assert owner_of(live) == owner(adopter)


async def test_two_applications_at_once_one_wins(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    created = await asyncio.gather(*(client.create(shared(n)) for n in ("left", "right")))
    await asyncio.gather(*(client.bind(app, DE) for app in created))

    async def decided() -> tuple[Application, Application] | None:
        apps = [await client.get(Application, n, NS) for n in ("left", "right")]
        won = [a for a in apps if a.status.state is ApplicationState.RUNNING]
        lost = [a for a in apps if await refused(client, a.metadata.name)]
        return (won[0], lost[0]) if len(won) == 1 and len(lost) == 1 else None

    winner, loser = await wait_for(decided, timeout=15, message="one RUNNING, one refused")
    live = await kube["de"].read(deployment("shared"), NS)
    assert owner_of(live) == owner(winner)
    assert loser.status.reason is not None
    assert f"application default/{winner.metadata.name}" in loser.status.reason.message


async def test_a_conflict_waits_longer_each_time_and_retry_tries_at_once(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    await deploy(client, shared("first"))
    await wait_for(lambda: running(client, "first"), timeout=15, message="first RUNNING")
    await deploy(client, shared("second"))

    async def attempt(n: int) -> Application | None:
        app = await refused(client, "second")
        return app if app is not None and (app.status.retries or 0) >= n else None

    for n, wait in ((1, "1"), (2, "2")):
        app = await wait_for(lambda n=n: attempt(n), timeout=15, message=f"attempt {n}")
        assert app.status.reason is not None
        assert f"next in {wait} s" in app.status.reason.message, app.status.reason.message
    # the owner goes; a retry tries again without waiting, its counts reset
    await client.delete(Application, "first", NS)
    await wait_for(lambda: gone(client, "first"), timeout=10, message="first deleted")
    answer = await client.request("PUT", f"/kubernetes/namespaces/{NS}/applications/second/retry")
    assert answer["status"]["retries"] is None
    # the scheduler passes a retried application at once; here, as it would, bind it again
    await client.bind(await client.get(Application, "second", NS), DE)
    await wait_for(lambda: running(client, "second"), timeout=15, message="second RUNNING")
