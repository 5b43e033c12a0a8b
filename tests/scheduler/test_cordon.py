"""Cordoned clusters (``spec.unschedulable``): no new placements, the explanation says
"cordoned", applications there stay through routine passes and leave on a forced one."""

from __future__ import annotations

import numpy as np

from shoal.api.server import ApiServer
from shoal.cli.maintenance import set_unschedulable
from shoal.client.rest import ShoalClient
from shoal.model.base import utcnow
from shoal.model.kubernetes import Application, Cluster
from shoal.model.scheduler_config import Plugins
from shoal.scheduler.backends import Backend, Group
from shoal.scheduler.framework import Framework, Request
from tests.reschedule.test_controller import MANIFEST
from tests.scheduler import helpers as h
from tests.util import wait_for


def _app(name: str, labels: list[str] | None = None) -> Application:
    return h.app(name, labels=labels, manifest=MANIFEST)


def _backend(name: str, cordoned: bool) -> Backend:
    cluster = h.cluster(name)
    cluster.spec.unschedulable = cordoned
    return Backend(cluster, name, h.NS, {}, frozenset(), "ONLINE", True, [])


def test_filter_keeps_the_current_cluster_of_a_routine_pass() -> None:
    group = Group([_backend("a", True), _backend("b", False)])
    framework = Framework(Plugins())
    new = framework.decide(Request(h.NS), group)
    assert new.chosen is not None and new.chosen.name == "b"
    assert [(r.reason, r.names) for r in new.rejections] == [("cordoned", ["a"])]
    assert new.explanation()["summary"] == "1/2 clusters available: 1 cordoned"
    # On "a" already: a routine pass may keep it there (stickiness wins), a forced one not.
    staying = framework.decide(Request(h.NS, current=(h.NS, "a"), stickiness=10.0), group)
    assert staying.chosen is not None and staying.chosen.name == "a"
    forced = framework.decide(Request(h.NS, current=(h.NS, "a"), sticky=False), group)
    assert forced.chosen is not None and forced.chosen.name == "b"
    everything = Group([_backend("a", True)])
    nowhere = framework.decide(Request(h.NS), everything)
    assert nowhere.chosen is None and "1 cordoned" in nowhere.summary
    assert np.array_equal(everything.mask("cordon", lambda b: False), [False])  # cache untouched


async def test_cordon_uncordon_and_forced_pass(api: ApiServer, client: ShoalClient) -> None:
    # a scores 0.6, b 0.4; stickiness 1.0 keeps an application on b once it is there.
    await client.create(h.provider("st", {"a": 0.6, "b": 0.4}))
    for name in ("a", "b"):
        await client.create(h.metric(f"m-{name}", "st", key=name))
        await h.register(client, h.cluster(name, labels={"name": name}, metrics={f"m-{name}": 1}))
    config = h.fast_config(stickiness=1.0, reschedule_after=0.2, retries=100)
    async with h.running(api.url, config):
        await client.create(_app("before"))
        assert await h.wait_bound(client, "before") == "a"
        cluster, changed = await set_unschedulable(client, "a", h.NS, True)
        assert changed and cluster.spec.unschedulable
        assert (await set_unschedulable(client, "a", h.NS, True))[1] is False

        await client.create(_app("after"))
        assert await h.wait_bound(client, "after") == "b"
        explanation = (await h.get_app(client, "after")).status.scheduling or {}
        assert explanation["rejected"] == [{"reason": "cordoned", "count": 1, "clusters": ["a"]}]

        await client.create(_app("only-a", labels=["name is a"]))

        async def waiting() -> str | None:
            app = await h.get_app(client, "only-a")
            return app.status.reason.message if app.status.reason else None

        message = await wait_for(waiting, message="only-a waits")
        assert "cordoned" in message

        # Routine passes (every 0.2 s) leave "before" on a; a forced pass moves it to b.
        await h.settle(0.6)
        assert await h.bound_to(client, "before") == "a"
        path = f"/kubernetes/namespaces/{h.NS}/applications/before/reschedule"
        await client.request("PUT", path, body={"requested": utcnow().isoformat()})
        assert await h.wait_bound(client, "before", to="b") == "b"

        await set_unschedulable(client, "a", h.NS, False)
        assert await h.wait_bound(client, "only-a", to="a") == "a"
        assert (await client.get(Cluster, "a", h.NS)).spec.unschedulable is False


def test_clouds_have_no_cordon_and_always_pass() -> None:
    from shoal.scheduler.cloud import cloud_backend

    group = Group([cloud_backend(h.cloud("os-1")), cloud_backend(h.global_cloud("os-2"))])
    decision = Framework(Plugins()).decide(Request(h.NS), group)
    assert decision.rejections == [] and decision.available == 2
