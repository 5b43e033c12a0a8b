"""ShoalClient: typed calls per kind and the error classes it raises."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import (
    ApiError,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ShoalClient,
    Unreachable,
    WatchEvent,
)
from shoal.model.base import Reason, ReasonCode, ResourceRef
from shoal.model.core import GlobalMetric
from shoal.model.infrastructure import GlobalCloud
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.testing import shipped
from tests.api.samples import APPLICATION, BY_KIND, CLUSTER
from tests.util import free_port


def application(name: str, namespace: str = "default", **labels: str) -> Application:
    return Application.model_validate(APPLICATION.body(name, namespace, **labels))


def cluster(name: str, namespace: str = "default") -> Cluster:
    return Cluster.model_validate(CLUSTER.body(name, namespace))


async def test_typed_crud(client: ShoalClient) -> None:
    created = await client.create(application("web", env="prod"))
    assert isinstance(created, Application)
    assert created.metadata.uid and created.metadata.resource_version
    got = await client.get(Application, "web", "default")
    assert got == created
    got.spec.backoff = 5
    updated = await client.update(got)
    assert updated.spec.backoff == 5
    assert updated.metadata.resource_version > created.metadata.resource_version  # type: ignore[operator]
    updated.status.state = ApplicationState.RUNNING
    updated.status.reason = Reason(code=ReasonCode.KUBERNETES_ERROR, message="x")
    status = await client.update_status(updated)
    assert status.status.state is ApplicationState.RUNNING
    assert status.status.reason is not None
    assert status.status.reason.code is ReasonCode.KUBERNETES_ERROR
    assert status.metadata.modified == updated.metadata.modified
    deleted = await client.delete(Application, "web", "default")
    assert deleted.metadata.deleted is not None
    with pytest.raises(NotFound):
        await client.get(Application, "web", "default")


async def test_global_kind(client: ShoalClient) -> None:
    sample = BY_KIND["GlobalMetric"]
    metric = await client.create(GlobalMetric.model_validate(sample.body("load")))
    assert metric.metadata.namespace is None
    assert [m.metadata.name for m in (await client.list(GlobalMetric)).items] == ["load"]
    await client.delete(GlobalMetric, "load")
    assert (await client.list(GlobalMetric)).items == []


async def test_list_pages_and_selectors(client: ShoalClient) -> None:
    for i in range(25):
        await client.create(application(f"app-{i:02d}", "a" if i % 2 else "b", parity=str(i % 2)))
    result = await client.list(Application, page_size=4)
    assert len(result.items) == 25
    assert len({(a.metadata.namespace, a.metadata.name) for a in result.items}) == 25
    assert result.revision >= 25
    odd = await client.list(Application, "a", label_selector="parity=1", page_size=3)
    assert [a.metadata.name for a in odd.items] == [f"app-{i:02d}" for i in range(1, 25, 2)]
    assert (await client.list(Application, "a", label_selector="parity!=1")).items == []


async def test_bind(client: ShoalClient) -> None:
    app = await client.create(application("web"))
    c1 = await client.create(cluster("c1"))
    bound = await client.bind(
        app, c1.ref(), resource_version=app.metadata.resource_version, explanation={"score": 1}
    )
    assert bound.status.scheduled_to == c1.ref()
    assert bound.status.scheduling == {"score": 1}
    with pytest.raises(Conflict) as caught:
        await client.bind(app, c1.ref(), resource_version=app.metadata.resource_version)
    assert caught.value.status == 409
    assert "resource_version" in caught.value.detail
    cloud = ResourceRef(api="infrastructure", kind="GlobalCloud", name="os")
    await client.create(GlobalCloud.model_validate(BY_KIND["GlobalCloud"].body("os")))
    bound_cluster = await client.bind_cluster(c1, cloud)
    assert bound_cluster.status.scheduled_to == cloud


async def test_errors(client: ShoalClient, api: ApiServer) -> None:
    with pytest.raises(NotFound) as not_found:
        await client.get(Application, "nope", "default")
    assert not_found.value.problem["status"] == 404 and "nope" in not_found.value.detail
    app = await client.create(application("web"))
    with pytest.raises(Conflict) as exists:
        await client.create(application("web"))
    assert exists.value.title == "RESOURCE_ALREADY_EXISTS"
    app.metadata.labels = {"a": "1"}
    await client.update(app)
    app.metadata.labels = {"a": "2"}
    with pytest.raises(Conflict):
        await client.update(app)  # stale resource_version
    with pytest.raises(Invalid) as invalid:
        await client.request(
            "POST",
            "/kubernetes/namespaces/default/applications",
            body={
                "api": "kubernetes",
                "kind": "Application",
                "metadata": {"name": "x"},
                "spec": {"backoff": "x"},
            },
        )
    assert invalid.value.status == 422 and "spec.backoff" in invalid.value.detail
    assert invalid.value.problem["errors"][0]["field"] == "spec.backoff"
    with pytest.raises(ApiError) as bad:
        await client.request("GET", "/kubernetes/applications", params={"label_selector": "a in ("})
    assert bad.value.status == 400 and type(bad.value) is ApiError
    with pytest.raises(ValueError):
        await client.get(Application, "web")  # namespaced kind needs a namespace
    # Gone: watch from a compacted revision
    for i in range(3):
        await client.create(application(f"more-{i}"))
    await api.store.compact(await api.store.revision())
    with pytest.raises(Gone):
        async for _ in client.watch(Application, "default", resource_version=1):
            pass


async def test_unreachable() -> None:
    async with ShoalClient(f"http://127.0.0.1:{free_port()}", timeout=2) as client:
        with pytest.raises(Unreachable):
            await client.get(Application, "web", "default")
        with pytest.raises(Unreachable):
            async for _ in client.watch(Application, "default"):
                pass


async def test_watch_events(client: ShoalClient) -> None:
    start = (await client.list(Application)).revision
    events: list[WatchEvent[Application]] = []

    async def collect() -> None:
        async for event in client.watch(
            Application, "default", resource_version=start, heartbeat=1.0
        ):
            events.append(event)
            if len(events) == 3:
                return

    task = asyncio.create_task(collect())
    app = await client.create(application("web"))
    app.spec.backoff = 2
    await client.update(app)
    await client.delete(Application, "web", "default")
    await asyncio.wait_for(task, 10)
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(isinstance(e.object, Application) for e in events)
    assert [e.revision for e in events] == sorted(e.revision for e in events)
    assert events[0].revision == app.metadata.resource_version


async def test_watch_ends_with_unreachable_when_the_server_stops(api: ApiServer) -> None:
    async with shipped.client(api.url) as client:

        async def consume() -> None:
            async for _ in client.watch(Application, heartbeat=1.0):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.3)
        await api.stop()
        with contextlib.suppress(Unreachable):
            await asyncio.wait_for(task, 10)
        assert task.done()
