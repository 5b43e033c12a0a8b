"""User alice has every right in namespace ``a`` and sees nothing of namespace ``b``."""

from __future__ import annotations

import asyncio

from tests.api.conftest import start_watch
from tests.security.conftest import Secured, application, cluster

B_NAMES = ("bob-app", "bob-cluster", "bob-very-secret")


async def _populate(secured: Secured) -> None:
    alice, bob = secured["alice"], secured["bob"]
    for client, ns, prefix in ((alice, "a", "alice"), (bob, "b", "bob")):
        answer = await client.post(
            f"/kubernetes/namespaces/{ns}/clusters",
            json=cluster(f"{prefix}-cluster", ns, f"{prefix}-very-secret"),
        )
        assert answer.status_code == 200, answer.text
        answer = await client.post(
            f"/kubernetes/namespaces/{ns}/applications", json=application(f"{prefix}-app", ns)
        )
        assert answer.status_code == 200, answer.text


def _leaks(text: str) -> bool:
    return any(name in text for name in B_NAMES)


async def test_alice_sees_nothing_of_b(secured: Secured) -> None:
    alice = secured["alice"]
    watch_all = await start_watch(alice, "/kubernetes/applications")
    watch_clusters = await start_watch(alice, "/kubernetes/clusters")
    await _populate(secured)
    forbidden = [
        ("GET", "/kubernetes/namespaces/b/applications/bob-app", None),
        ("GET", "/kubernetes/namespaces/b/applications", None),
        ("GET", "/kubernetes/namespaces/b/clusters/bob-cluster", None),
        ("GET", "/kubernetes/namespaces/b/clusters", None),
        (
            "PUT",
            "/kubernetes/namespaces/b/applications/bob-app/reschedule",
            {"requested": "2030-01-01T00:00:00Z"},
        ),
        ("POST", "/scheduling/namespaces/b/dryrun", application("x", "b")),
        ("GET", "/scheduling/rescheduletasks", None),
        (
            "POST",
            "/scheduling/rescheduletasks",
            {
                "api": "scheduling",
                "kind": "RescheduleTask",
                "metadata": {"name": "t"},
                "spec": {"target_ref_policy": [{"namespace": "b", "label_selector": ""}]},
            },
        ),
        ("DELETE", "/kubernetes/namespaces/b/applications/bob-app", None),
    ]
    for method, path, body in forbidden:
        answer = await alice.request(method, path, json=body)
        assert answer.status_code == 403, (method, path, answer.status_code)
        assert not _leaks(answer.text)
    item = {"namespace": "b", "name": "bob-app", "requested": "2030-01-01T00:00:00Z"}
    batch = await alice.post("/scheduling/reschedules", json={"items": [item]})
    assert [r["status"] for r in batch.json()["results"]] == [403]  # answered per item
    bob_app = (await secured["bob"].get("/kubernetes/namespaces/b/applications/bob-app")).json()
    assert bob_app["status"].get("reschedule_requested") is None  # not touched
    watch_b = await start_watch(alice, "/kubernetes/namespaces/b/applications")
    assert watch_b.status == 403
    for path in (
        "/kubernetes/applications",
        "/kubernetes/clusters",
        "/kubernetes/applications?limit=1",
    ):
        answer = await alice.get(path)
        assert answer.status_code == 200
        assert not _leaks(answer.text), path
        assert {i["metadata"]["namespace"] for i in answer.json()["items"]} <= {"a"}
    assert (await alice.get("/kubernetes/applications")).json()["items"][0]["metadata"][
        "name"
    ] == "alice-app"
    dry = await alice.post("/scheduling/namespaces/a/dryrun", json=application("x", "a"))
    assert dry.status_code == 200 and not _leaks(dry.text)
    explained = await alice.get("/kubernetes/namespaces/a/applications/alice-app")
    assert not _leaks(explained.text)
    metrics = await alice.get("/metrics")
    assert metrics.status_code == 200 and not _leaks(metrics.text)
    await asyncio.sleep(0.3)
    for watch in (watch_all, watch_clusters):
        assert watch.status == 200
        names = [e["object"]["metadata"]["name"] for e in watch.events]
        assert names and all(n.startswith("alice") for n in names), names
        await watch.stop()
