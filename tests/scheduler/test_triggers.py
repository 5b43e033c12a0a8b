"""Every input is a trigger; a deleted cluster's applications move first; waiting is not failing."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import NotFound, ShoalClient
from shoal.model.application_status import staleness
from shoal.model.base import Reason, ReasonCode
from shoal.model.kubernetes import EVICTION_FINALIZER, Application, ApplicationState, Cluster
from tests.scheduler import helpers as h
from tests.util import until_gone, wait_for


async def _relabel(client: ShoalClient, name: str, **labels: str) -> None:
    cluster = await client.get(Cluster, name, h.NS)
    cluster.metadata.labels.update(labels)
    await client.update(cluster)


async def test_relabel_moves_bound_and_places_waiting_applications(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.register(client, h.cluster("a", labels={"location": "DE"}))
    await h.register(client, h.cluster("b", labels={"location": "FR"}))
    config = h.fast_config(backoff={"initial": 30, "cap": 60})  # only a trigger can help
    async with h.running(api.url, config):
        await client.create(h.app("web", labels=["location is DE"]))
        await client.create(h.app("api", labels=["location is IT"]))
        assert await h.wait_bound(client, "web") == "a"

        async def waiting() -> Application | None:
            a = await h.get_app(client, "api")
            return a if a.status.schedule_reason is not None else None

        api_app = await wait_for(waiting, timeout=3, message="api waiting")
        assert api_app.status.state is ApplicationState.PENDING
        assert api_app.status.scheduler_attempts == 1
        assert api_app.status.scheduler_retries is None  # unlimited by default
        assert api_app.status.next_retry is not None
        web = await h.get_app(client, "web")
        assert staleness(web.status.scheduling, (await client.list(Cluster, h.NS)).items) == []

        await _relabel(client, "b", location="DE")  # b may now host web: web stays (sticky)
        await _relabel(client, "a", location="FR")  # a may not: web moves at once
        await h.wait_bound(client, "web", "b", timeout=3)
        await _relabel(client, "a", location="IT")  # api fits a now
        await h.wait_bound(client, "api", "a", timeout=3)
        api_app = await h.get_app(client, "api")
        assert api_app.status.schedule_reason is None and api_app.status.reason is None
        assert api_app.status.next_retry is None

        # A decision is dated, and stale once a cluster it looked at changes.
        web = await h.get_app(client, "web")
        assert datetime.fromisoformat((web.status.scheduling or {})["time"])
        await _relabel(client, "a", tier="gold")  # web is on b: not re-evaluated
        changes = staleness(web.status.scheduling, (await client.list(Cluster, h.NS)).items)
        assert len(changes) == 1 and changes[0].startswith("cluster a changed"), changes


async def test_a_cluster_that_no_longer_matches_unbinds_when_nothing_else_fits(
    api: ApiServer, client: ShoalClient
) -> None:
    """Its labels changed so that the application's constraints exclude it: the application
    waits, unbound, with a reason naming that cluster (its copy runs on where it ran), and
    binds as soon as a cluster matches. A cordoned cluster, by contrast, keeps it."""
    await h.register(client, h.cluster("a", labels={"location": "DE"}))
    await h.register(client, h.cluster("b", labels={"location": "FR"}))
    config = h.fast_config(backoff={"initial": 30, "cap": 60})  # only a trigger can help
    async with h.running(api.url, config):
        await client.create(h.app("web", labels=["location is DE"]))
        assert await h.wait_bound(client, "web") == "a"
        await _relabel(client, "a", location="IT")

        async def unbound() -> Application | None:
            app = await h.get_app(client, "web")
            return app if app.status.scheduled_to is None else None

        web = await wait_for(unbound, timeout=10, message="web unbound from a")
        assert web.status.state is ApplicationState.PENDING
        assert web.status.last_scheduled_to is not None
        assert web.status.last_scheduled_to.name == "a"
        reason = web.status.schedule_reason
        assert reason is not None and reason.code is ReasonCode.RESOURCE_NOT_FOUND
        assert "cluster a no longer matches" in reason.message, reason.message
        await _relabel(client, "b", location="DE")
        await h.wait_bound(client, "web", "b", timeout=10)


async def test_deleting_a_cluster_moves_its_applications_first(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.register(client, h.cluster("a"))
    async with h.running(api.url, h.fast_config(retries=3)) as sch:
        pinned = h.app("pinned")
        pinned.spec.constraints.migration = False
        pinned.spec.retry_delay = 30  # stays unplaced long enough to be seen
        for app in (h.app("web"), h.app("db"), pinned, h.app("stuck")):
            await client.create(app)
        for name in ("web", "db", "pinned", "stuck"):
            assert await h.wait_bound(client, name) == "a"
        # a FAILED application bound there: no pass moves it, eviction unbinds it
        no_cluster = Reason(code=ReasonCode.NO_SUITABLE_RESOURCE, message="No cluster available")
        await client.patch_status(Application, "stuck", h.NS, {"schedule_reason": no_cluster})

        await h.register(client, h.cluster("b"))
        deleted = await client.delete(Cluster, "a", h.NS)
        assert deleted.metadata.deleted is not None  # marked; removed once its apps left
        assert EVICTION_FINALIZER in deleted.metadata.finalizers

        await until_gone(client, Cluster, "a", h.NS, timeout=3)
        assert await h.bound_to(client, "web") == "b"
        assert await h.bound_to(client, "db") == "b"
        for name in ("pinned", "stuck"):
            app = await h.get_app(client, name)
            assert app.status.scheduled_to is None, name
            assert app.status.last_scheduled_to is not None
            assert app.status.last_scheduled_to.name == "a"
        app = await h.get_app(client, "pinned")
        assert app.status.state is ApplicationState.PENDING
        assert app.status.reason is not None
        assert app.status.reason.code is ReasonCode.CLUSTER_DELETED
        assert "cluster a" in app.status.reason.message
        assert (await h.get_app(client, "stuck")).status.state is ApplicationState.FAILED
        assert sch.eviction.evicted >= 1


@pytest.mark.parametrize("other", [False, True])
async def test_force_deletes_at_once_with_the_same_outcome(
    api: ApiServer, client: ShoalClient, other: bool
) -> None:
    await h.register(client, h.cluster("a"))
    async with h.running(api.url, h.fast_config(backoff={"initial": 30, "cap": 60})):
        for name in ("web", "db"):
            await client.create(h.app(name))
            assert await h.wait_bound(client, name) == "a"
        if other:
            await h.register(client, h.cluster("b"))
        path = f"/kubernetes/namespaces/{h.NS}/clusters/a"
        await client.request("DELETE", path, params={"force": "true"})
        with pytest.raises(NotFound):
            await client.get(Cluster, "a", h.NS)

        async def settled() -> bool:
            apps = (await client.list(Application, h.NS)).items
            return all(
                (a.status.scheduled_to is not None and a.status.scheduled_to.name == "b")
                if other
                else (
                    a.status.scheduled_to is None
                    and a.status.reason is not None
                    and a.status.reason.code is ReasonCode.CLUSTER_DELETED
                )
                for a in apps
            )

        await wait_for(settled, timeout=3, message="applications moved or CLUSTER_DELETED")


async def test_retry_tries_a_waiting_or_failed_application_at_once(
    api: ApiServer, client: ShoalClient
) -> None:
    async with h.running(api.url, h.fast_config()):
        app = h.app("web", labels=["location is DE"])
        app.spec.retry_delay = 60
        await client.create(app)

        async def attempted(count: int) -> Application | None:
            a = await h.get_app(client, "web")
            return a if a.status.scheduler_attempts == count else None

        first = await wait_for(lambda: attempted(1), timeout=3, message="first attempt")
        assert first.status.next_retry is not None
        path = f"/kubernetes/namespaces/{h.NS}/applications/web/retry"
        await client.request("PUT", path)
        # tried again now, not in 60 s: its counts start again from this attempt
        again = await wait_for(lambda: attempted(1), timeout=3, message="attempt after retry")
        assert (again.status.scheduling or {})["time"] > (first.status.scheduling or {})["time"]

        failed = Reason(code=ReasonCode.NO_SUITABLE_RESOURCE, message="No cluster available")
        fields = {"schedule_reason": failed, "next_retry": None}  # as the scheduler fails it
        app = await client.patch_status(Application, "web", h.NS, fields)
        assert app.status.state is ApplicationState.FAILED
        await h.register(client, h.cluster("c1", labels={"location": "DE"}))
        await asyncio.sleep(0.3)
        assert await h.bound_to(client, "web") is None  # FAILED stays until retried
        await client.request("PUT", path)
        await h.wait_bound(client, "web", "c1", timeout=3)
