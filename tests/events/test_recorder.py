"""The recorder against a real API: dedupe, batched writes, counts merged on the server."""

from __future__ import annotations

import httpx

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.events import Recorder
from shoal.model.base import Metadata
from shoal.model.events import Event
from shoal.model.kubernetes import Application, ApplicationSpec
from shoal.testing import builders, shipped

MANIFEST = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {}}]


async def _app(client: ShoalClient, name: str = "web") -> Application:
    return await client.create(builders.app(name, manifest=MANIFEST))


async def test_repeats_are_one_event_with_a_count(client: ShoalClient) -> None:
    app = await _app(client)
    recorder = Recorder(client, "scheduler", interval=60)
    for k in range(1, 4):
        recorder.emit(app, "Unschedulable", f"retry {k}/5 in {k}s", type="Warning", key="x")
    recorder.emit(app, "Scheduled", "Scheduled to c1 (score 0.50, 1/1 clusters available)")
    assert await recorder.flush() == 2
    recorder.emit(app, "Unschedulable", "retry 4/5 in 8s", type="Warning", key="x")
    assert await recorder.flush() == 1
    events = {e.reason: e for e in (await client.list(Event, "default")).items}
    assert set(events) == {"Unschedulable", "Scheduled"}
    retry = events["Unschedulable"]
    assert retry.count == 4 and retry.message == "retry 4/5 in 8s" and retry.type == "Warning"
    assert retry.first_timestamp is not None and retry.last_timestamp is not None
    assert retry.first_timestamp < retry.last_timestamp
    assert retry.involved_object.uid == app.metadata.uid
    assert retry.involved_object.kind == "Application"
    assert retry.reporting_component == "scheduler"
    assert events["Scheduled"].count == 1
    await recorder.close()


ADMIN = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}


async def _counter(api: ApiServer, name: str) -> float:
    async with httpx.AsyncClient(headers=ADMIN) as http:
        text = (await http.get(api.url + "/metrics")).text
    return sum(float(line.split()[1]) for line in text.splitlines() if line.startswith(name + " "))


async def test_batches_of_a_thousand(client: ShoalClient, api: ApiServer) -> None:
    apps = [await _app(client, f"a{i}") for i in range(3)]
    stored, cpu = await _counter(api, "shoal_events_stored_total"), await _counter(api, _CPU)
    recorder = Recorder(client, "scheduler", interval=60)
    for i in range(2500):
        recorder.emit(apps[i % 3], "Scheduled", f"Scheduled to c{i}")
    # flush, not only close: close gives its last flush 2 s (a stopping component does
    # not wait on a dead API), which 2,500 events can take on a loaded machine
    assert await recorder.flush() == 2500
    await recorder.close()
    listed = await client.list(Event, "default")
    assert len(listed.items) == 2500
    # The API counts what it stored and the CPU it took (bench/schedule.py reads them).
    assert await _counter(api, "shoal_events_stored_total") - stored == 2500
    assert await _counter(api, _CPU) > cpu


_CPU = "shoal_events_store_cpu_seconds_total"


async def test_two_writers_add_up(client: ShoalClient, api: ApiServer) -> None:
    """Two replicas reporting the same event: counts add, nothing is lost."""
    app = await _app(client)
    first, second = Recorder(client, "kube-controller"), Recorder(client, "kube-controller")
    for _ in range(3):
        first.emit(app, "Deployed", "3/3 pods ready")
    for _ in range(2):
        second.emit(app, "Deployed", "3/3 pods ready")
    await first.flush()
    await second.flush()
    (event,) = (await client.list(Event, "default")).items
    assert event.count == 5
    await first.close()
    await second.close()


async def test_bad_items_get_their_own_problem(api: ApiServer) -> None:
    good = {
        "metadata": {"name": "ok", "namespace": "default"},
        "involved_object": {"api": "kubernetes", "kind": "Application", "name": "web"},
        "reason": "Scheduled",
        "reporting_component": "scheduler",
    }
    bad = dict(good, reason="not camel")
    async with httpx.AsyncClient(base_url=api.url, headers=ADMIN) as http:
        response = await http.post("/core/events", json={"events": [good, bad]})
        assert response.status_code == 422, response.text
        assert "reason" in response.text
        response = await http.post("/core/events", json={"events": [good, good]})
        assert response.status_code == 200
        results = response.json()["results"]
        assert [r["status"] for r in results] == [200, 200]
        stored = (await http.get("/core/namespaces/default/events/ok")).json()
        assert stored["count"] == 2 and stored["expires"] > stored["last_timestamp"]


async def test_disabled_or_without_client_records_nothing(client: ShoalClient) -> None:
    app = await _app(client)
    for recorder in (Recorder(None, "x"), Recorder(client, "x", enabled=False)):
        recorder.emit(app, "Scheduled", "nothing")
        assert await recorder.flush() == 0
    assert (await client.list(Event, "default")).items == []


async def test_refused_batches_are_dropped_and_unreachable_ones_kept(client: ShoalClient) -> None:
    app = await _app(client)
    recorder = Recorder(client, "scheduler", interval=60)
    recorder.emit(app, "not camel case", "refused: 422 for the batch")
    assert await recorder.flush() == 0
    assert await recorder.flush() == 0  # dropped, not sent again
    assert (await client.list(Event, "default")).items == []
    async with ShoalClient("http://127.0.0.1:9", timeout=1) as nowhere:
        away = Recorder(nowhere, "scheduler", interval=60)
        away.emit(app, "Scheduled", "kept for later")
        assert await away.flush() == 0
    away.client = client  # the API is back
    assert await away.flush() == 1
    await recorder.close()
    await away.close()


async def test_migrations_of_different_causes_are_different_events(client: ShoalClient) -> None:
    """A move off an OFFLINE cluster and a later move for a better score keep both causes;
    repeats of the same cause still count as one event."""
    from dataclasses import dataclass, field
    from typing import Any

    from shoal.events.reasons import placed
    from shoal.model.base import ResourceRef

    @dataclass
    class Decision:
        total: int = 2
        available: int = 2
        score: float | None = 0.9
        ranking: list[dict[str, Any]] = field(default_factory=list)
        summary: str = "2/2 clusters available"

    app = await _app(client)
    recorder = Recorder(client, "scheduler", interval=60)
    sim2 = ResourceRef(api="kubernetes", kind="Cluster", namespace="default", name="sim-2")
    placed(recorder, app, Decision(), "sim-1", current=sim2, current_state="OFFLINE",
           forced=False)  # fmt: skip
    for score in (0.4, 0.3):
        ranking = [{"cluster": "sim-2", "score": score}]
        placed(recorder, app, Decision(ranking=ranking), "sim-1", current=sim2,
               current_state="ONLINE", forced=False)  # fmt: skip
    assert await recorder.flush() == 2
    events = (await client.list(Event, "default")).items
    migrated = sorted((e.count, e.message) for e in events if e.reason == "Migrated")
    assert len(migrated) == 2
    assert migrated[0][0] == 1 and "(cluster OFFLINE)" in migrated[0][1]
    assert migrated[1][0] == 2 and "(score 0.300)" in migrated[1][1]
    await recorder.close()


async def test_events_of_objects_with_krake_names_are_written(client: ShoalClient) -> None:
    """Krake's names (``system:admin``, ``_``, 255 characters) name valid events."""
    recorder = Recorder(client, "scheduler", interval=60)
    apps = []
    for name in ("_", "web:v1.2", "x" * 255):
        spec = ApplicationSpec.model_validate({"manifest": MANIFEST})
        app = Application(metadata=Metadata(name=name, namespace="system:admin"), spec=spec)
        apps.append(await client.create(app))
        recorder.emit(apps[-1], "Scheduled", "Scheduled to c1")
    assert await recorder.flush() == 3
    events = (await client.list(Event, "system:admin")).items
    assert sorted(e.involved_object.name for e in events) == sorted(
        a.metadata.name for a in apps
    )
