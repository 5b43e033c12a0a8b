"""The scheduler end to end: in-process API on SQLite, a Scheduler with a fast config."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import Conflict, ShoalClient
from shoal.model.base import ReasonCode
from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterState
from tests.scheduler import helpers as h
from tests.util import wait_for


async def test_label_constraints(api: ApiServer, client: ShoalClient) -> None:
    await h.register(client, h.cluster("c-de", labels={"location": "DE", "tier": "gold"}))
    await h.register(client, h.cluster("c-fr", labels={"location": "FR", "tier": "gold"}))
    await h.register(client, h.cluster("c-bare"))
    async with h.running(api.url):
        await client.create(h.app("de", labels=["location is DE", "tier in (gold, silver)"]))
        await client.create(h.app("not-de", labels=["location != DE"]))
        await client.create(h.app("not-in", labels=["location not in (DE)"]))
        assert await h.wait_bound(client, "de") == "c-de"
        # A cluster lacking the label matches no constraint on it, negative ones included.
        assert await h.wait_bound(client, "not-de") == "c-fr"
        assert await h.wait_bound(client, "not-in") == "c-fr"
        await client.create(h.app("nowhere", labels=["zone is a"]))

        async def pending() -> bool:
            a = await h.get_app(client, "nowhere")
            return a.status.reason is not None

        await wait_for(pending, message="nowhere pending")
        a = await h.get_app(client, "nowhere")
        assert a.status.scheduled_to is None
        assert a.status.state is ApplicationState.PENDING
        assert a.status.reason is not None
        assert a.status.reason.code is ReasonCode.RESOURCE_NOT_FOUND
        assert "3 label zone is a" in a.status.reason.message


async def test_metric_constraint_uses_raw_value(api: ApiServer, client: ShoalClient) -> None:
    # Raw values 7 and 3 on [0, 10]: normalised 0.7 and 0.3 would fail "> 5" for both.
    await client.create(h.provider("static", {"m7": 7.0, "m3": 3.0}))
    await client.create(h.metric("m7", hi=10))
    await client.create(h.metric("m3", hi=10))
    await h.register(client, h.cluster("seven", metrics={"m7": 1}))
    await h.register(client, h.cluster("three", metrics={"m3": 1}))
    async with h.running(api.url):
        await client.create(h.app("big", metrics=["m7 > 5"]))
        await client.create(h.app("small", metrics=["m3 <= 3"]))
        assert await h.wait_bound(client, "big") == "seven"
        assert await h.wait_bound(client, "small") == "three"


async def test_custom_resource_constraint(api: ApiServer, client: ShoalClient) -> None:
    await h.register(client, h.cluster("plain"))
    await h.register(client, h.cluster("crd", crds=["certificates.cert-manager.io"]))
    async with h.running(api.url):
        for i in range(5):
            await client.create(h.app(f"a{i}", crds=["certificates.cert-manager.io"]))
        for i in range(5):
            assert await h.wait_bound(client, f"a{i}") == "crd"


# --- ranking ---------------------------------------------------------------------------


async def test_clusters_with_metrics_preferred(api: ApiServer, client: ShoalClient) -> None:
    await h.static_metrics(client, {"low": 0.01})
    for i in range(3):
        await h.register(client, h.cluster(f"bare{i}"))
    await h.register(client, h.cluster("metered", metrics={"low": 1}))
    async with h.running(api.url):
        for i in range(5):
            await client.create(h.app(f"a{i}"))
        for i in range(5):
            assert await h.wait_bound(client, f"a{i}") == "metered"
        a = await h.get_app(client, "a0")
        assert a.status.scheduling is not None
        assert "3 without metrics" in a.status.scheduling["summary"]


async def test_score_formula_with_stickiness(api: ApiServer, client: ShoalClient) -> None:
    """Current cluster (0.1·1 + 0.5·1)/(0.1 + 1) ≈ 0.545 loses to another at 0.6."""
    await h.static_metrics(client, {"m-a": 0.5, "m-b": 0.6})
    await h.register(client, h.cluster("a", metrics={"m-a": 1}))
    async with h.running(api.url, h.fast_config(reschedule_after=0.3)):
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        first = await h.get_app(client, "web")
        await h.register(client, h.cluster("b", metrics={"m-b": 1}))

        async def moved() -> bool:
            return await h.bound_to(client, "web") == "b"

        await wait_for(moved, timeout=5, message="migration to b")
        a = await h.get_app(client, "web")
        assert a.status.scheduling is not None
        ranking = {r["cluster"]: r for r in a.status.scheduling["ranking"]}
        assert ranking["b"]["score"] == pytest.approx(0.6)
        assert ranking["a"]["score"] == pytest.approx((0.1 * 1.0 + 0.5 * 1) / (0.1 + 1))
        assert ranking["a"]["stickiness"] == {"value": 1.0, "weight": 0.1}
        assert "stickiness" not in ranking["b"]
        assert [r["cluster"] for r in a.status.scheduling["ranking"]] == ["b", "a"]
        # A migration is a new decision: scheduled and kube_controller_triggered move.
        assert first.status.scheduled is not None and a.status.scheduled is not None
        assert a.status.scheduled > first.status.scheduled
        assert a.status.kube_controller_triggered is not None
        assert first.status.kube_controller_triggered is not None
        assert a.status.kube_controller_triggered > first.status.kube_controller_triggered


async def test_stickiness_keeps_small_changes(api: ApiServer, client: ShoalClient) -> None:
    """0.54 < (0.1 + 0.5)/1.1: the application stays, and nothing is written."""
    await h.static_metrics(client, {"m-a": 0.5, "m-b": 0.54})
    await h.register(client, h.cluster("a", metrics={"m-a": 1}))
    async with h.running(api.url, h.fast_config(reschedule_after=0.2)) as sch:
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        before = await h.get_app(client, "web")
        await h.register(client, h.cluster("b", metrics={"m-b": 1}))
        passes = sch.passes
        await wait_for(lambda: sch.passes >= passes + 3, message="three reschedule passes")
        after = await h.get_app(client, "web")
        assert after.status.scheduled_to is not None and after.status.scheduled_to.name == "a"
        assert after.metadata.resource_version == before.metadata.resource_version


async def test_periodic_rescheduling_migrates_despite_status_writes(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.static_metrics(client, {"m-a": 0.8, "m-b": 0.2})
    await h.register(client, h.cluster("a", metrics={"m-a": 1}))
    await h.register(client, h.cluster("b", metrics={"m-b": 1}))
    async with h.running(api.url, h.fast_config(reschedule_after=1.0, metrics_refresh=0.1)):
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        # A better cluster appears; only the periodic pass can move the app there (a new
        # cluster wakes waiting applications only, and its metric value is known already).
        await h.set_static(client, {"m-c": 0.95})
        await client.create(h.metric("m-c"))
        await asyncio.sleep(0.4)
        await h.register(client, h.cluster("c", metrics={"m-c": 1}))
        stop = asyncio.Event()

        async def chatter() -> None:
            n = 0
            while not stop.is_set():
                a = await h.get_app(client, "web")
                n += 1
                a.status.container_health.running_pods = n
                a.status.running_on = a.status.scheduled_to
                # the scheduler's binding may land between the read and the write: a
                # status writer reads again, as the kube controller does
                with contextlib.suppress(Conflict):
                    await client.update_status(a)
                await asyncio.sleep(0.05)

        task = asyncio.create_task(chatter())
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()

            async def moved() -> bool:
                return await h.bound_to(client, "web") == "c"

            await wait_for(moved, timeout=4, message="periodic migration to c")
            assert loop.time() - started < 3.0
        finally:
            stop.set()
            await task

        # Metric values change: the cache notices within metrics_refresh and b now wins.
        await h.set_static(client, {"m-a": 0.1, "m-c": 0.1, "m-b": 0.9})

        async def to_b() -> bool:
            return await h.bound_to(client, "web") == "b"

        await wait_for(to_b, timeout=4, message="migration to b after metric change")


async def test_spec_update_rebinds_on_same_cluster(api: ApiServer, client: ShoalClient) -> None:
    await h.register(client, h.cluster("only", labels={"location": "DE"}))
    async with h.running(api.url):
        await client.create(h.app("web"))
        await h.wait_bound(client, "web")
        first = await h.get_app(client, "web")
        assert first.status.kube_controller_triggered is not None
        assert first.metadata.modified is not None
        assert first.status.kube_controller_triggered >= first.metadata.modified
        first.spec.constraints.cluster.labels = ["location is DE"]
        updated = await client.update(first)
        assert updated.metadata.modified is not None
        assert updated.status.kube_controller_triggered is not None
        assert updated.metadata.modified > updated.status.kube_controller_triggered

        async def retriggered() -> Application | None:
            a = await h.get_app(client, "web")
            t = a.status.kube_controller_triggered
            return a if t is not None and a.metadata.modified and t >= a.metadata.modified else None

        a = await wait_for(retriggered, timeout=2, message="new kube_controller_triggered")
        assert a.status.scheduled_to is not None and a.status.scheduled_to.name == "only"
        assert a.status.scheduled == first.status.scheduled


async def test_migration_false_pins(api: ApiServer, client: ShoalClient) -> None:
    await h.static_metrics(client, {"m-a": 0.3, "m-b": 0.1})
    await h.register(client, h.cluster("a", metrics={"m-a": 1}))
    await h.register(client, h.cluster("b", metrics={"m-b": 1}))
    async with h.running(api.url, h.fast_config(reschedule_after=0.2, metrics_refresh=0.1)) as sch:
        await client.create(h.app("pinned", migration=False))
        await client.create(h.app("free"))
        assert await h.wait_bound(client, "pinned") == "a"
        assert await h.wait_bound(client, "free") == "a"
        await h.set_static(client, {"m-a": 0.1, "m-b": 0.9})

        async def free_moved() -> bool:
            return await h.bound_to(client, "free") == "b"

        await wait_for(free_moved, timeout=4, message="free app migrated")
        passes = sch.passes
        await wait_for(lambda: sch.passes >= passes + 4, message="more passes")
        assert await h.bound_to(client, "pinned") == "a"


@pytest.mark.parametrize("how", ["deleted", "offline"])
async def test_cluster_lost_app_moves(api: ApiServer, client: ShoalClient, how: str) -> None:
    await h.static_metrics(client, {"m-a": 0.9, "m-b": 0.1})
    await h.register(client, h.cluster("a", metrics={"m-a": 1}))
    await h.register(client, h.cluster("b", metrics={"m-b": 1}))
    async with h.running(api.url):
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        if how == "deleted":
            await client.delete(Cluster, "a", h.NS)
        else:
            c = await client.get(Cluster, "a", h.NS)
            c.status.state = ClusterState.OFFLINE
            await client.update_status(c)

        async def moved() -> bool:
            return await h.bound_to(client, "web") == "b"

        await wait_for(moved, timeout=2, message="app moved to b")
        a = await h.get_app(client, "web")
        assert a.metadata.deleted is None
        assert a.status.state not in (ApplicationState.DELETING, ApplicationState.FAILED)


# --- retry with delay while nothing fits ----------------------------------------


async def test_retry_workflow_then_cluster_appears(api: ApiServer, client: ShoalClient) -> None:
    config = h.fast_config(retries=5, backoff={"initial": 0.3, "factor": 1.5, "cap": 5})
    async with h.running(api.url, config):
        await client.create(h.app("web", labels=["location is DE"]))
        seen: list[int] = []

        async def counted_down() -> bool:
            a = await h.get_app(client, "web")
            if a.status.scheduler_retries is not None and (
                not seen or seen[-1] != a.status.scheduler_retries
            ):
                seen.append(a.status.scheduler_retries)
                assert a.status.state is ApplicationState.PENDING
                assert a.status.reason is not None
                assert a.status.reason.code is ReasonCode.RESOURCE_NOT_FOUND
                assert a.status.scheduled_to is None
            return len(seen) >= 3

        await wait_for(counted_down, timeout=5, interval=0.01, message="retries counting down")
        assert seen[:3] == [4, 3, 2]
        await h.register(client, h.cluster("c1", labels={"location": "DE"}))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await h.wait_bound(client, "web", timeout=2) == "c1"
        assert loop.time() - t0 < 1.0
        a = await h.get_app(client, "web")
        assert a.status.reason is None
        assert a.status.state is ApplicationState.PENDING  # the kube controller takes it on


async def test_retries_exhausted_fail(api: ApiServer, client: ShoalClient) -> None:
    async with h.running(api.url, h.fast_config(retries=3)) as sch:
        await client.create(h.app("web"))

        async def failed() -> Application | None:
            a = await h.get_app(client, "web")
            return a if a.status.state is ApplicationState.FAILED else None

        a = await wait_for(failed, timeout=5, message="FAILED")
        assert a.status.reason is not None
        assert a.status.reason.code is ReasonCode.NO_SUITABLE_RESOURCE
        assert a.status.reason.message == "No cluster available"
        assert a.status.scheduler_retries == 0
        # FAILED applications are left alone, even when a cluster appears.
        passes = sch.passes
        await h.register(client, h.cluster("late"))
        await asyncio.sleep(0.5)
        assert sch.passes == passes
        assert await h.bound_to(client, "web") is None


@pytest.mark.parametrize("exhaust", [True, False])
async def test_constraint_update_resets_retries(
    api: ApiServer, client: ShoalClient, exhaust: bool
) -> None:
    """An application's cluster constraints, then the application updated."""
    await h.register(client, h.cluster("c-fr", labels={"location": "FR"}))
    config = h.fast_config(retries=3 if exhaust else 5, backoff={"initial": 0.1, "cap": 0.2})
    if not exhaust:
        config = h.fast_config(retries=50, backoff={"initial": 0.2, "factor": 1, "cap": 0.2})
    async with h.running(api.url, config):
        await client.create(h.app("web", labels=["location is DE"]))

        async def stuck() -> Application | None:
            a = await h.get_app(client, "web")
            want = ApplicationState.FAILED if exhaust else ApplicationState.PENDING
            low = 0 if exhaust else config.retries - 3
            ok = a.status.state is want and (a.status.scheduler_retries or 99) <= max(low, 1)
            return a if ok or (exhaust and a.status.state is want) else None

        a = await wait_for(stuck, timeout=5, message="stuck on constraints")
        assert a.status.reason is not None
        assert "label location is DE" in (a.status.scheduling or {}).get("summary", "")
        a.spec.constraints.cluster.labels = ["location is FR"]
        await client.update(a)
        assert await h.wait_bound(client, "web", timeout=2) == "c-fr"
        a = await h.get_app(client, "web")
        assert a.status.reason is None
        assert a.status.state is not ApplicationState.FAILED


async def test_retries_reset_and_count_again(api: ApiServer, client: ShoalClient) -> None:
    """After an unfitting constraint update, retries start again from the configured number."""
    config = h.fast_config(retries=3, backoff={"initial": 0.1, "cap": 0.2})
    async with h.running(api.url, config):
        await client.create(h.app("web", labels=["location is DE"]))

        async def failed() -> Application | None:
            a = await h.get_app(client, "web")
            return a if a.status.state is ApplicationState.FAILED else None

        a = await wait_for(failed, timeout=5, message="FAILED")
        a.spec.constraints.cluster.labels = ["location is FR"]
        await client.update(a)

        async def retrying() -> Application | None:
            b = await h.get_app(client, "web")
            return b if b.status.state is ApplicationState.PENDING else None

        b = await wait_for(retrying, timeout=3, message="PENDING again")
        assert b.status.scheduler_retries == 2
        assert b.status.reason is not None
        assert b.status.reason.code is ReasonCode.RESOURCE_NOT_FOUND
        await wait_for(failed, timeout=5, message="FAILED again")


# --- cluster → cloud -------------------------------------------------------------------


async def test_cluster_bound_to_best_cloud(api: ApiServer, client: ShoalClient) -> None:
    await h.static_metrics(client, {"green": 0.9, "grey": 0.3, "red": 1.0, "cheap": 0.95})
    await client.create(h.cloud("ns-de", labels={"location": "DE"}, metrics={"grey": 1}))
    await client.create(h.global_cloud("g-de", labels={"location": "DE"}, metrics={"green": 1}))
    await client.create(h.global_cloud("g-fr", labels={"location": "FR"}, metrics={"red": 1}))
    await client.create(h.global_cloud("g-de-bare", labels={"location": "DE"}))
    await client.create(h.cloud("cheap-de", labels={"location": "DE"}, metrics={"cheap": 1}))
    async with h.running(api.url):
        c = h.cluster("new", kubeconfig=False)
        c.spec.constraints.cloud.labels = ["location is DE"]
        c.spec.constraints.cloud.metrics = ["green > 0.5"]
        await client.create(c)
        # Only g-de has "green" (a cloud lacking the metric fails the constraint).
        c2 = h.cluster("new2", kubeconfig=False)
        c2.spec.constraints.cloud.labels = ["location is DE"]
        await client.create(c2)
        # Metric-only score among DE clouds with metrics: cheap-de 0.95 > g-de 0.9 > ns-de 0.3.
        existing = h.cluster("existing")
        await client.create(existing)

        async def cloud_of(name: str) -> str | None:
            got = await client.get(Cluster, name, h.NS)
            ref = got.status.scheduled_to
            return f"{ref.kind}/{ref.name}" if ref else None

        async def both() -> bool:
            return (await cloud_of("new")) is not None and (await cloud_of("new2")) is not None

        await wait_for(both, timeout=3, message="clusters bound to clouds")
        assert await cloud_of("new") == "GlobalCloud/g-de"
        assert await cloud_of("new2") == "Cloud/cheap-de"
        await asyncio.sleep(0.2)
        assert await cloud_of("existing") is None  # has a kubeconfig: not the handler's


async def test_a_cluster_no_cloud_fits_says_why_until_one_does(
    api: ApiServer, client: ShoalClient
) -> None:
    """Its status.reason and a NoCloud event say why; a fitting cloud binds it, clears the
    reason and records BoundToCloud."""
    from shoal.events.recorder import KIND_LABEL, NAME_LABEL
    from shoal.model.events import Event

    async def events() -> dict[str, Event]:
        selector = f"{KIND_LABEL}=Cluster,{NAME_LABEL}=later"
        return {e.reason: e for e in (await client.list(Event, label_selector=selector)).items}

    await client.create(h.global_cloud("g-fr", labels={"location": "FR"}))
    async with h.running(api.url):
        c = h.cluster("later", kubeconfig=False)
        c.spec.constraints.cloud.labels = ["location is DE"]
        await client.create(c)

        async def waiting() -> Cluster | None:
            got = await client.get(Cluster, "later", h.NS)
            return got if got.status.reason is not None else None

        cluster = await wait_for(waiting, timeout=5, message="a reason on the cluster")
        assert cluster.status.reason is not None
        assert cluster.status.reason.code is ReasonCode.RESOURCE_NOT_FOUND
        assert cluster.status.reason.message == (
            "no cloud fits: 0/1 clouds available: 1 label location is DE"
        )
        assert cluster.status.state is ClusterState.PENDING
        found = await wait_for(lambda: _with(events, "NoCloud"), timeout=5, message="NoCloud")
        assert found["NoCloud"].type == "Warning"
        assert "location is DE" in found["NoCloud"].message

        await client.create(h.global_cloud("g-de", labels={"location": "DE"}))

        async def bound() -> Cluster | None:
            got = await client.get(Cluster, "later", h.NS)
            return got if got.status.scheduled_to is not None else None

        cluster = await wait_for(bound, timeout=5, message="bound to g-de")
        assert cluster.status.scheduled_to is not None
        assert cluster.status.scheduled_to.name == "g-de"
        found = await wait_for(lambda: _with(events, "BoundToCloud"), timeout=5, message="event")
        assert "GlobalCloud g-de" in found["BoundToCloud"].message
        cleared = await client.get(Cluster, "later", h.NS)
        assert cleared.status.reason is None


async def _with(events: Any, reason: str) -> Any:
    found = await events()
    return found if reason in found else None


async def test_failing_metric(api: ApiServer, client: ShoalClient) -> None:
    await h.static_metrics(client, {"ok": 0.2})
    await client.create(h.metric("ghost", provider_name="missing"))
    await h.register(client, h.cluster("healthy", metrics={"ok": 1}))
    await h.register(client, h.cluster("sick", metrics={"ghost": 1}))
    async with h.running(api.url, h.fast_config(metrics_refresh=0.1)) as sch:
        # Registered, and no application ranked on it yet: ONLINE, as Krake leaves it.
        await wait_for(lambda: h.metric_state_synced(sch, "sick"), timeout=3, message="synced")
        sick = await client.get(Cluster, "sick", h.NS)
        assert sick.status.state is ClusterState.ONLINE and sick.status.metrics_reasons == {}
        # A failing cluster takes no application; the ranking makes it FAILING_METRICS.
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "healthy"
        a = await h.get_app(client, "web")
        assert a.status.scheduling is not None
        assert "1 failing metrics" in a.status.scheduling["summary"]

        async def failing() -> Cluster | None:
            c = await client.get(Cluster, "sick", h.NS)
            return c if c.status.state is ClusterState.FAILING_METRICS else None

        c = await wait_for(failing, timeout=3, message="FAILING_METRICS")
        assert set(c.status.metrics_reasons) == {"ghost"}
        assert c.status.metrics_reasons["ghost"].code is ReasonCode.UNKNOWN_METRICS_PROVIDER
        # Fixing the provider brings it back.
        await client.create(h.provider("missing", {"ghost": 0.7}))

        async def online() -> Cluster | None:
            c = await client.get(Cluster, "sick", h.NS)
            return c if c.status.state is ClusterState.ONLINE else None

        c = await wait_for(online, timeout=3, message="ONLINE again")
        assert c.status.metrics_reasons == {}
        await client.create(h.app("web2"))
        assert await h.wait_bound(client, "web2") == "sick"
