"""KubeController alone against `shoal sim` clusters, bound by hand: drift, updates, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.copies.objects import tells_anything
from shoal.copies.watch import ClusterWatches
from shoal.kube import writes
from shoal.kube.controller import KubeController
from shoal.model.base import ReasonCode, ResourceRef
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.sim.server import SimServer
from shoal.testing.shipped import Callers
from tests.kube.conftest import NS, application
from tests.util import kubectl, started, wait_for

pytestmark = pytest.mark.integration

DE = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="de")
FR = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="fr")


@pytest.fixture
async def controller(client: ShoalClient, clusters: list[Cluster]) -> AsyncIterator[KubeController]:
    """Readiness polls are rare: what happens quickly happens because of the watches."""
    async with started(KubeController(
        client, poll_interval=20.0, fallback=20.0, resync=60.0, timeout=2.0, cleanup_retry=0.5
    )) as ctl:
        yield ctl


def _dep(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}


async def _ready_replicas(kube: KubeCluster, name: str) -> int | None:
    dep = await kube.read(_dep(name), NS)
    if dep is None:
        return None
    return int((dep.get("status") or {}).get("readyReplicas") or 0)


async def _app(client: ShoalClient, name: str) -> Application:
    return await client.get(Application, name, NS)


async def _running_on(client: ShoalClient, name: str, cluster: str) -> Application | None:
    app = await _app(client, name)
    ok = (
        app.status.state is ApplicationState.RUNNING
        and app.status.running_on is not None
        and app.status.running_on.name == cluster
    )
    return app if ok else None


async def test_drift_is_put_back(
    client: ShoalClient,
    sim: SimServer,
    kube: dict[str, KubeCluster],
    controller: KubeController,
    tmp_path: Path,
) -> None:
    app = await client.create(application("web", replicas=2))
    await client.bind(app, DE)
    # RUNNING within a few seconds although readiness is polled every 20 s: the watch told
    await wait_for(lambda: _running_on(client, "web", "de"), timeout=8, message="web RUNNING")
    assert controller.watches is not None
    assert controller.watches.watched((NS, "web"), (NS, "de"))

    # someone deletes the Deployment with kubectl: it comes back, with its pods
    config = tmp_path / "de.yaml"
    config.write_text(yaml.safe_dump(sim.clusters.kubeconfig("de")))
    await kubectl(config, "delete", "deployment", "web", "-n", NS)

    async def back() -> bool:
        return await _ready_replicas(kube["de"], "web") == 2

    await wait_for(back, timeout=8, message="Deployment re-created and ready")
    assert controller.drift_repairs >= 1

    # someone scales it: the applied replicas are put back
    repairs = controller.drift_repairs
    await kube["de"].request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{NS}/deployments/web",
        body={"spec": {"replicas": 5}},
        content_type="application/merge-patch+json",
    )

    async def replicas_back() -> bool:
        dep = await kube["de"].read(_dep("web"), NS)
        return dep is not None and dep["spec"]["replicas"] == 2

    await wait_for(replicas_back, timeout=8, message="replicas put back to 2")
    assert controller.drift_repairs > repairs
    await wait_for(lambda: _running_on(client, "web", "de"), timeout=8, message="web RUNNING")

    # a label someone else adds is not ours: no fight over it
    repairs = controller.drift_repairs
    await kube["de"].request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{NS}/deployments/web",
        body={"metadata": {"labels": {"team": "ops"}}},
        content_type="application/merge-patch+json",
    )
    await asyncio.sleep(0.5)
    assert controller.drift_repairs == repairs
    dep = await kube["de"].read(_dep("web"), NS)
    assert dep is not None and dep["metadata"]["labels"]["team"] == "ops"


async def test_spec_update_waits_for_the_scheduler(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    app = await client.create(application("upd", replicas=1))
    await client.bind(app, FR)
    app = await wait_for(lambda: _running_on(client, "upd", "fr"), timeout=8, message="RUNNING")

    app.spec.manifest[0]["spec"]["replicas"] = 3
    app = await client.update(app)
    # the scheduler has not seen the new spec (kube_controller_triggered < modified): no action
    await asyncio.sleep(0.6)
    dep = await kube["fr"].read(_dep("upd"), NS)
    assert dep is not None and dep["spec"]["replicas"] == 1
    current = await _app(client, "upd")
    assert current.status.state is ApplicationState.RUNNING

    # the scheduler re-binds (to the same cluster): RECONCILING, then RUNNING with 3 replicas
    states: list[ApplicationState] = []
    await client.bind(current, FR)

    async def reconciled() -> Application | None:
        current = await _app(client, "upd")
        states.append(current.status.state)
        ready = await _ready_replicas(kube["fr"], "upd")
        if current.status.state is ApplicationState.RUNNING and ready == 3:
            return current
        return None

    done = await wait_for(reconciled, timeout=8, interval=0.02, message="3 replicas RUNNING")
    assert ApplicationState.RECONCILING in states
    assert done.status.last_applied_manifest == done.spec.manifest
    assert done.status.container_health.running_pods == 3
    assert done.status.kube_controller_triggered is not None
    assert done.metadata.modified is not None
    assert done.status.kube_controller_triggered >= done.metadata.modified


async def test_backoff_limit_fails_the_application(
    client: ShoalClient, controller: KubeController
) -> None:
    app = Application.model_validate(
        {
            "metadata": {"name": "bad", "namespace": NS},
            "spec": {
                "manifest": [
                    {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
                ],
                "backoff_delay": 0,
                "backoff_limit": 2,
            },
        }
    )
    app = await client.create(app)
    await client.bind(app, DE)

    async def failed() -> Application | None:
        current = await _app(client, "bad")
        return current if current.status.state is ApplicationState.FAILED else None

    current = await wait_for(failed, timeout=8, message="bad FAILED")
    assert current.status.reason is not None
    assert current.status.reason.code is ReasonCode.CREATE_FAILED
    # FAILED stays FAILED: no more attempts until someone asks for a retry
    await asyncio.sleep(0.5)
    again = await _app(client, "bad")
    assert again.status.state is ApplicationState.FAILED
    assert again.metadata.resource_version == current.metadata.resource_version


async def test_copy_left_on_unreachable_cluster_is_removed_later(
    client: ShoalClient,
    sim: SimServer,
    kube: dict[str, KubeCluster],
    controller: KubeController,
) -> None:
    app = await client.create(application("left", replicas=1))
    await client.bind(app, DE)
    await wait_for(lambda: _running_on(client, "left", "de"), timeout=8, message="on de")

    sim.clusters.set_unreachable("de", True)
    await client.bind(await _app(client, "left"), FR)
    moved = await wait_for(lambda: _running_on(client, "left", "fr"), timeout=10, message="on fr")
    assert [e["cluster"]["name"] for e in moved.status.pending_cleanups] == ["de"]
    assert moved.status.pending_cleanups[0]["objects"] == [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "left"}}
    ]

    sim.clusters.set_unreachable("de", False)

    async def cleaned() -> bool:
        current = await _app(client, "left")
        gone = await kube["de"].read(_dep("left"), NS) is None
        return gone and not current.status.pending_cleanups

    await wait_for(cleaned, timeout=10, message="old copy on de removed")
    assert await _ready_replicas(kube["fr"], "left") == 1


async def test_watch_resumes_and_relists_when_compacted(
    sim: SimServer, kube: dict[str, KubeCluster]
) -> None:
    woken: list[tuple[str | None, str]] = []

    async def get_kube(key: tuple[str | None, str]) -> KubeCluster:
        return kube[key[1]]

    watches = ClusterWatches(get_kube, woken.append, retry=0.05, max_retry=0.2)
    app, de = (NS, "x"), (NS, "de")
    watches.set_app(app, {(de, ("v1", "ConfigMap", NS, "cm"))})
    try:
        await wait_for(lambda: watches.watched(app, de), timeout=5, message="watch up")
        assert watches.lists == 1 and woken == [app]  # a list wakes everybody

        async def create(name: str) -> None:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
            await kube["de"].request("POST", f"/api/v1/namespaces/{NS}/configmaps", body=body)

        await create("other")  # not ours: nobody is woken
        await create("cm")
        await wait_for(lambda: len(woken) == 2, timeout=5, message="event for cm")

        # a cut watch resumes from the last resourceVersion: no list, missed events replayed
        sim.clusters.set_unreachable("de", True)
        await wait_for(lambda: not watches.watched(app, de), timeout=5, message="watch down")
        sim.clusters.set_unreachable("de", False)
        await kube["de"].delete(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
        )
        await wait_for(lambda: len(woken) == 3, timeout=5, message="DELETED after resume")
        assert watches.lists == 1

        # history forgotten while disconnected: 410, then a fresh list
        sim.clusters.set_unreachable("de", True)
        await wait_for(lambda: not watches.watched(app, de), timeout=5, message="watch down")
        sim.clusters.set_node_fault("de", "n-0", memory_pressure=True)  # newer resourceVersions
        sim.clusters.cluster("de").store.compact()
        sim.clusters.set_unreachable("de", False)
        await wait_for(lambda: watches.lists == 2, timeout=5, message="re-list after 410")
        await wait_for(lambda: watches.watched(app, de), timeout=5, message="watch up again")

        watches.set_app(app, ())
        assert watches.targets == set()
    finally:
        await watches.stop()


async def test_a_writers_own_event_wakes_only_the_others(kube: dict[str, KubeCluster]) -> None:
    """The event of an apply may come before its answer: it wakes the object's other
    applications at once, and the writer only if something newer than its answer came."""
    woken: list[tuple[str | None, str]] = []

    async def get_kube(key: tuple[str | None, str]) -> KubeCluster:
        return kube[key[1]]

    watches = ClusterWatches(
        get_kube, woken.append, wakes=tells_anything, retry=0.05, max_retry=0.2
    )
    writer, other, de = (NS, "writer"), (NS, "other"), (NS, "de")
    cm = ("v1", "ConfigMap", NS, "cm")
    watches.set_app(writer, {(de, cm)})
    watches.set_app(other, {(de, cm)})
    collection = f"/api/v1/namespaces/{NS}/configmaps"

    def config_map(value: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
                "data": {"k": value}}  # fmt: skip

    try:
        await wait_for(lambda: watches.watched(writer, de), timeout=5, message="watch up")
        await wait_for(lambda: len(woken) == 2, timeout=5, message="the list wakes both")
        woken.clear()

        # its own write: the event comes while it waits, and wakes the other alone
        watches.applying(de, cm, writer)
        answer = await kube["de"].request("POST", collection, body=config_map("1"))
        await wait_for(lambda: woken == [other], timeout=5, message="the other woken")
        watches.observe(de, cm, answer)
        await asyncio.sleep(0.2)
        assert woken == [other]

        # someone else wrote after it: that is news to the writer too
        woken.clear()
        watches.applying(de, cm, writer)
        answer = await kube["de"].request("PUT", f"{collection}/cm", body=config_map("2"))
        await kube["de"].request("PUT", f"{collection}/cm", body=config_map("3"))
        await wait_for(lambda: woken == [other, other], timeout=5, message="both events")
        watches.observe(de, cm, answer)
        assert woken == [other, other, writer]

        # a write that failed: whatever came meanwhile wakes the writer
        woken.clear()
        watches.applying(de, cm, writer)
        await kube["de"].request("PUT", f"{collection}/cm", body=config_map("5"))
        await wait_for(lambda: woken == [other], timeout=5, message="the other woken")
        watches.observe(de, cm, None)
        assert woken == [other, writer]
    finally:
        await watches.stop()


async def test_the_echo_of_a_write_come_before_its_answer_queues_nothing(
    client: ShoalClient, client_of: Callers,
) -> None:
    """A status write's event may beat its answer: held until the answer says whose it is."""
    controller = KubeController(
        client_of("kube-controller")
    )  # not started: its queue is looked at, not worked
    app = await client.create(application("echo"))
    key = (NS, "echo")

    def version(rv: int) -> Application:
        return app.model_copy(
            update={"metadata": app.metadata.model_copy(update={"resource_version": rv})}
        )

    async def write(answer: int, *events: int) -> None:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(writes.answered(controller, key, future))
        await asyncio.sleep(0)
        for rv in events:
            controller._app_event(version(rv), app)
        assert len(controller.queue) == 0  # held while the write is in flight
        future.set_result(answer)
        assert await task == answer

    await write(40, 40)  # its own echo
    assert len(controller.queue) == 0 and controller.written[key] == 40
    await write(42, 41, 42)  # another's write came meanwhile
    assert len(controller.queue) == 1 and controller.written[key] == 42
    controller.queue.done(await controller.queue.get())
    controller._app_event(version(42), app)  # an echo after its answer, as before
    assert len(controller.queue) == 0

    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(writes.answered(controller, key, future))
    await asyncio.sleep(0)
    controller._app_event(version(43), app)
    future.set_exception(ConnectionResetError())
    with pytest.raises(ConnectionResetError):
        await task
    assert len(controller.queue) == 1  # a failed write: what came meanwhile is looked at
