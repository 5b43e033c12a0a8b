"""Watch streams: ndjson events, heartbeats, resume, 410 after compaction, no event lost."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

import httpx
import pytest

from shoal.api.server import ApiServer
from tests.api.conftest import Watch, start_watch
from tests.api.samples import APPLICATION, BY_KIND, CLUSTER
from tests.util import wait_for


async def create(http: httpx.AsyncClient, name: str, ns: str = "default", **labels: str) -> Any:
    response = await http.post(
        APPLICATION.collection(ns), json=APPLICATION.body(name, ns, **labels)
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


async def test_watch_streams_ndjson_events(http: httpx.AsyncClient) -> None:
    watch = await start_watch(http, APPLICATION.collection(), heartbeat=1.0)
    try:
        created = await create(http, "web")
        body = copy.deepcopy(created)
        body["metadata"]["labels"] = {"x": "y"}
        updated = (await http.put(APPLICATION.item("web"), json=body)).json()
        await http.delete(APPLICATION.item("web"))
        await create(http, "other", "elsewhere")  # another namespace: not in this stream
        await wait_for(lambda: len(watch.events) >= 3)
        await asyncio.sleep(0.1)
        assert [e["type"] for e in watch.events] == ["ADDED", "MODIFIED", "DELETED"]
        assert set(watch.events[0]) == {"type", "object"}
        assert watch.events[0]["object"] == created
        assert watch.events[1]["object"] == updated
        assert watch.revisions() == sorted(watch.revisions())
        assert len(set(watch.revisions())) == 3
    finally:
        await watch.stop()


async def test_watch_content_type_and_heartbeats(http: httpx.AsyncClient) -> None:
    async with http.stream(
        "GET", APPLICATION.collection(), params={"watch": "", "heartbeat": 1.0}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = response.aiter_lines()
        for _ in range(3):
            line = await asyncio.wait_for(lines.__anext__(), 2)
            assert line == ""


async def test_watch_false_is_a_list(http: httpx.AsyncClient) -> None:
    await create(http, "web")
    response = await http.get(APPLICATION.collection(), params={"watch": "false"})
    assert response.json()["kind"] == "ApplicationList"


async def test_watch_list_all_and_global_kinds(http: httpx.AsyncClient) -> None:
    everything = await start_watch(http, APPLICATION.collection(None), heartbeat=1.0)
    metric = BY_KIND["GlobalMetric"]
    metrics = await start_watch(http, metric.collection(), heartbeat=1.0)
    try:
        await create(http, "a", "ns1")
        await create(http, "b", "ns2")
        await http.post(metric.collection(), json=metric.body("m"))
        await wait_for(lambda: len(everything.events) == 2 and len(metrics.events) == 1)
        names = [e["object"]["metadata"]["namespace"] for e in everything.events]
        assert names == ["ns1", "ns2"]
        assert metrics.events[0]["object"]["kind"] == "GlobalMetric"
    finally:
        await everything.stop()
        await metrics.stop()


async def test_watch_with_label_selector(http: httpx.AsyncClient) -> None:
    watch = await start_watch(
        http, APPLICATION.collection(), heartbeat=1.0, label_selector="env in (prod)"
    )
    try:
        await create(http, "a", env="prod")
        await create(http, "b", env="dev")
        await create(http, "c", env="prod")
        await wait_for(lambda: len(watch.events) >= 2)
        await asyncio.sleep(0.1)
        assert [e["object"]["metadata"]["name"] for e in watch.events] == ["a", "c"]
    finally:
        await watch.stop()


async def test_resume_gives_exactly_the_later_events(http: httpx.AsyncClient) -> None:
    revisions = []
    for i in range(10):
        revisions.append((await create(http, f"app-{i}"))["metadata"]["resource_version"])
    watch = await start_watch(
        http, APPLICATION.collection(), heartbeat=1.0, resource_version=revisions[4]
    )
    try:
        await wait_for(lambda: len(watch.events) >= 5)
        await create(http, "late")
        await wait_for(lambda: len(watch.events) >= 6)
        await asyncio.sleep(0.1)
        assert watch.revisions()[:5] == revisions[5:]
        assert [e["object"]["metadata"]["name"] for e in watch.events] == [
            *(f"app-{i}" for i in range(5, 10)),
            "late",
        ]
    finally:
        await watch.stop()
    # from revision 0: everything in the history
    watch = await start_watch(http, APPLICATION.collection(), heartbeat=1.0, resource_version=0)
    try:
        await wait_for(lambda: len(watch.events) >= 11)
        assert watch.revisions()[:10] == revisions
    finally:
        await watch.stop()


async def test_compacted_revision_is_410(http: httpx.AsyncClient, api: ApiServer) -> None:
    revisions = [(await create(http, f"app-{i}"))["metadata"]["resource_version"] for i in range(5)]
    await api.store.compact(revisions[2])
    response = await http.get(
        APPLICATION.collection(), params={"watch": "", "resource_version": revisions[0]}
    )
    assert response.status_code == 410
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 410 and problem["title"] and "resource_version" in problem["detail"]
    # the compaction point itself is still fine: events after it are kept
    watch = await start_watch(
        http, APPLICATION.collection(), heartbeat=1.0, resource_version=revisions[2]
    )
    try:
        await wait_for(lambda: len(watch.events) >= 2)
        assert watch.status == 200
        assert watch.revisions() == revisions[3:]
    finally:
        await watch.stop()


async def test_bad_watch_parameters(http: httpx.AsyncClient) -> None:
    for params in (
        {"watch": "", "resource_version": "abc"},
        {"watch": "", "resource_version": "-1"},
        {"watch": "", "heartbeat": "0"},
        {"watch": "", "heartbeat": "soon"},
        {"watch": "", "label_selector": "a in ("},
    ):
        response = await http.get(APPLICATION.collection(), params=params)
        assert 400 <= response.status_code < 500, params
        assert response.headers["content-type"].startswith("application/problem+json")


async def _flood(http: httpx.AsyncClient, names: list[str], parallel: int = 16) -> None:
    gate = asyncio.Semaphore(parallel)

    async def one(name: str) -> None:
        async with gate:
            response = await http.post(
                APPLICATION.collection(), json=APPLICATION.body(name, "default")
            )
            assert response.status_code in (200, 201), response.text

    await asyncio.gather(*(one(n) for n in names))


def _check_all_added(watch: Watch, names: list[str]) -> None:
    assert [e["type"] for e in watch.events] == ["ADDED"] * len(names)
    revisions = watch.revisions()
    assert all(a < b for a, b in itertools.pairwise(revisions))
    assert sorted(e["object"]["metadata"]["name"] for e in watch.events) == sorted(names)


@pytest.mark.slow
async def test_no_event_lost_under_2000_concurrent_creates(http: httpx.AsyncClient) -> None:
    watch = await start_watch(http, APPLICATION.collection(), heartbeat=1.0)
    names = [f"app-{i:04d}" for i in range(2000)]
    try:
        await _flood(http, names)
        await wait_for(lambda: len(watch.events) >= 2000, timeout=30, message="2000 events")
        await asyncio.sleep(0.3)
        _check_all_added(watch, names)
    finally:
        await watch.stop()


@pytest.mark.slow
async def test_no_event_lost_across_a_cut_and_resume(http: httpx.AsyncClient) -> None:
    names = [f"app-{i:04d}" for i in range(2000)]
    first = await start_watch(http, APPLICATION.collection(), heartbeat=1.0)
    flood = asyncio.create_task(_flood(http, names))
    try:
        await wait_for(lambda: len(first.events) >= 300, timeout=30, message="300 events")
    finally:
        await first.stop()  # cut the stream mid-flood
    last = first.revisions()[-1]
    second = await start_watch(http, APPLICATION.collection(), heartbeat=1.0, resource_version=last)
    try:
        await flood
        await wait_for(
            lambda: len(first.events) + len(second.events) >= 2000, timeout=30, message="events"
        )
        await asyncio.sleep(0.3)
        combined = Watch(events=first.events + second.events)
        _check_all_added(combined, names)
    finally:
        await second.stop()


async def test_watch_survives_a_cluster_status_flood(http: httpx.AsyncClient) -> None:
    await http.post(CLUSTER.collection(), json=CLUSTER.body("c", "default"))
    watch = await start_watch(http, CLUSTER.collection(), heartbeat=1.0)
    try:
        for i in range(50):
            current = (await http.get(CLUSTER.item("c"))).json()
            current["status"]["node_summary"] = [{"i": i}]
            assert (await http.put(CLUSTER.item("c") + "/status", json=current)).status_code == 200
        await wait_for(lambda: len(watch.events) >= 50)
        summaries = [e["object"]["status"]["node_summary"] for e in watch.events]
        assert [summary[0]["i"] for summary in summaries] == list(range(50))
    finally:
        await watch.stop()
