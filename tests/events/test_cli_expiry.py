"""``shoal get events [--for KIND/NAME] [-w]`` and the expiry of old events."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.events import Recorder
from shoal.events.expiry import expire_once
from shoal.model.base import utcnow
from shoal.model.events import Event
from shoal.model.kubernetes import Application, Cluster
from shoal.testing import builders
from tests.cli.conftest import Shoal, ok

MANIFEST = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {}}]


async def _objects(client: ShoalClient) -> tuple[Application, Cluster]:
    app = builders.app("web", manifest=MANIFEST)
    return await client.create(app), await client.create(builders.cluster("c1"))


async def test_get_events_for_one_object(shoal: Shoal, client: ShoalClient) -> None:
    app, cluster = await _objects(client)
    recorder = Recorder(client, "scheduler")
    recorder.emit(app, "Unschedulable", "No cluster fits, retry 1/5 in 1 s", type="Warning")
    await recorder.flush()
    recorder.emit(app, "Scheduled", "Scheduled to c1 (score 0.600, 1/1 clusters available)")
    recorder.emit(cluster, "Online", "CONNECTING → ONLINE, 1/1 nodes ready")
    await recorder.flush()

    lines = ok(await shoal("get", "events")).stdout.splitlines()
    assert lines[0].split() == [
        "NAMESPACE",
        "LAST_SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "COUNT",
        "FROM",
        "MESSAGE",
    ]
    assert len(lines) == 4 and "Unschedulable" in lines[1]  # oldest first
    assert ("application/web" in lines[1] and "cluster/c1" in lines[-1]) or "cluster/c1" in lines[2]

    lines = ok(await shoal("get", "events", "--for", "app/web")).stdout.splitlines()
    assert [line.split()[3] for line in lines[1:]] == ["Unschedulable", "Scheduled"]
    assert "score 0.600, 1/1 clusters available" in lines[2]
    lines = ok(await shoal("get", "ev", "--for", "cluster/c1", "-o", "wide")).stdout.splitlines()
    assert len(lines) == 2 and "Online" in lines[1]
    result = await shoal("get", "events", "--for", "web")
    assert result.exit_code != 0 and "KIND/NAME" in result.output
    result = await shoal("get", "clusters", "--for", "app/web")
    assert result.exit_code != 0 and "--for" in result.output

    watch = asyncio.ensure_future(
        shoal("get", "events", "--for", "app/web", "-w", "--watch-timeout", "3")
    )
    await asyncio.sleep(1.0)
    recorder.emit(app, "Deployed", "Deployed on c1: 2/2 pods ready, 1 objects applied")
    recorder.emit(cluster, "Offline", "ONLINE → OFFLINE", type="Warning")
    await recorder.flush()
    out = ok(await watch).stdout
    assert "Deployed" in out and "2/2 pods ready" in out and "Offline" not in out
    await recorder.close()


async def test_expired_events_are_removed(client: ShoalClient, api: ApiServer) -> None:
    app, _ = await _objects(client)
    old = Recorder(client, "scheduler", ttl=-60)  # already expired when written
    fresh = Recorder(client, "scheduler")
    for i in range(3):
        old.emit(app, "Scheduled", f"old {i}")
    fresh.emit(app, "Scheduled", "fresh")
    await old.flush()
    await fresh.flush()
    assert await expire_once(client) == 3
    (left,) = (await client.list(Event, "default")).items
    assert left.message == "fresh" and left.expires is not None
    assert left.expires - utcnow() > timedelta(minutes=59)
    assert await expire_once(client) == 0
