"""Field-level status patches: one writer per field, state and reason derived in one place."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import orjson

from shoal.api.server import start_api
from shoal.client.rest import Conflict, ShoalClient
from shoal.model.base import Reason, ReasonCode, ResourceRef
from shoal.model.kubernetes import Application, ApplicationState
from tests.security.conftest import TOKENS, security

APP = "/kubernetes/namespaces/default/applications"


def _app(name: str) -> dict[str, Any]:
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}]
    return {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"manifest": manifest},
    }


async def _create(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    answer = await http.post(APP, json=_app(name))
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


async def test_concurrent_writers_keep_each_others_fields(
    http: httpx.AsyncClient, client: ShoalClient
) -> None:
    await _create(http, "web")
    cluster = ResourceRef(api="kubernetes", kind="Cluster", namespace="default", name="c1")
    reason = Reason(code=ReasonCode.CLUSTER_NOT_REACHABLE, message="c1 does not answer")
    writes = [
        client.patch_status(Application, "web", "default", {"scheduled_to": cluster}),
        client.patch_status(Application, "web", "default", {"running_on": cluster}),
        client.patch_status(Application, "web", "default", {"deploy_reason": reason}),
        client.patch_status(Application, "web", "default", {"services": {"web": "1.2.3.4"}}),
    ] * 5
    await asyncio.gather(*writes)
    app = await client.get(Application, "web", "default")
    assert app.status.scheduled_to == cluster
    assert app.status.running_on == cluster
    assert app.status.services == {"web": "1.2.3.4"}
    # derived in one place: the kube controller's reason, no deploy state yet
    assert (app.status.state, app.status.reason) == (ApplicationState.PENDING, reason)


async def test_state_and_reason_derive_from_the_writers_fields(client: ShoalClient) -> None:
    await client.create(Application.model_validate(_app("api")))
    waiting = Reason(code=ReasonCode.RESOURCE_NOT_FOUND, message="no cluster has label x")
    app = await client.patch_status(
        Application, "api", "default", {"schedule_reason": waiting, "scheduler_attempts": 1}
    )
    assert (app.status.state, app.status.reason) == (ApplicationState.PENDING, waiting)
    # the kube controller says RUNNING: the scheduler's word still wins while it holds
    app = await client.patch_status(Application, "api", "default", {"deploy_state": "RUNNING"})
    assert app.status.state is ApplicationState.PENDING
    app = await client.patch_status(Application, "api", "default", {"schedule_reason": None})
    assert (app.status.state, app.status.reason) == (ApplicationState.RUNNING, None)
    assert app.status.scheduler_attempts == 1  # not touched by either patch
    app = await client.patch_status(Application, "api", "default", {"deploy_state": "DELETING"})
    assert app.status.state is ApplicationState.DELETING


async def test_precondition_and_bad_fields(http: httpx.AsyncClient, client: ShoalClient) -> None:
    created = await _create(http, "db")
    revision = created["metadata"]["resource_version"]
    await client.patch_status(Application, "db", "default", {"scheduler_attempts": 2}, revision)
    try:
        await client.patch_status(Application, "db", "default", {"scheduler_attempts": 3}, revision)
    except Conflict:
        pass
    else:
        raise AssertionError("a stale resource_version was accepted")
    for body, field in (
        ({"status": {"scheduler_attempts": -1}}, "status.scheduler_attempts"),
        ({"status": {"state": "RUNNING"}}, "status.state"),
        ({"status": {"deploy_state": "SLEEPING"}}, "status.deploy_state"),
        ({"spec": {}}, "spec"),
        ({"status": 3}, "status"),
    ):
        answer = await http.patch(f"{APP}/db/status", json=body)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["errors"][0]["field"] == field
    answer = await http.patch(f"{APP}/nothing/status", json={"status": {}})
    assert answer.status_code == 404


async def test_a_batch_of_patches_answers_per_item(
    http: httpx.AsyncClient, client: ShoalClient
) -> None:
    created = await _create(http, "b1")
    await _create(http, "b2")
    stale = created["metadata"]["resource_version"]
    await client.patch_status(Application, "b1", "default", {"scheduler_attempts": 1})
    cluster = ResourceRef(api="kubernetes", kind="Cluster", namespace="default", name="c1")
    results = await client.patch_status_many(
        [
            {
                "namespace": "default",
                "name": "b2",
                "status": {"deploy_state": ApplicationState.RUNNING, "running_on": cluster},
            },
            {"namespace": "default", "name": "b1", "status": {}, "resource_version": stale},
            {"namespace": "default", "name": "gone", "status": {"retries": 1}},
            {"namespace": "default", "name": "b1", "status": {"state": "RUNNING"}},
        ]
    )
    assert [r["status"] for r in results] == [200, 409, 404, 422]
    b2 = await client.get(Application, "b2", "default")
    assert b2.metadata.resource_version == results[0]["resource_version"]
    assert (b2.status.state, b2.status.running_on) == (ApplicationState.RUNNING, cluster)
    answer = await http.post("/scheduling/applicationstatuses", json={"items": [{"name": "b2"}]})
    assert answer.status_code == 422
    assert answer.headers["content-type"] == "application/problem+json"


async def test_batches_of_statuses_and_finalizers_refuse_bad_bodies_by_field(
    http: httpx.AsyncClient,
) -> None:
    """The batches' bodies are held to their models: each problem names its field."""
    item = {"namespace": "default", "name": "x"}
    for path, good in (
        ("/scheduling/applicationstatuses", {**item, "status": {}}),
        ("/scheduling/applicationfinalizers", {**item, "finalizers": []}),
    ):
        answer = await http.post(path, json={"items": [good]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"][0]["status"] == 404
        for body, status, field in (
            (b"{", 400, "body"),
            (b"[]", 400, "body"),
            (b'{"items": [], "items": []}', 400, "body"),
            (orjson.dumps({"items": [{**good, "name": ""}]}), 422, "items[0].name"),
            (orjson.dumps({"items": [good] * 1001}), 422, "items"),
            (orjson.dumps({"items": [good], "extra": 1}), 422, "extra"),
        ):
            headers = {"content-type": "application/json"}
            strict = {"fieldValidation": "Strict"}  # else an unknown field is dropped
            answer = await http.post(path, content=body, headers=headers, params=strict)
            assert answer.status_code == status, (path, body[:40], answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.json()["errors"][0]["field"] == field, answer.text


async def test_bookkeeping_updates_leave_modified_alone(http: httpx.AsyncClient) -> None:
    """Finalizers and owners are no new spec: the scheduler does not pass again for them."""
    app = await _create(http, "kept")
    app["metadata"]["finalizers"] = ["shoal.kube/resources"]
    answer = await http.put(f"{APP}/kept", json=app)
    assert answer.status_code == 200, answer.text
    stored = answer.json()
    assert stored["metadata"]["finalizers"] == ["shoal.kube/resources"]
    assert stored["metadata"]["resource_version"] > app["metadata"]["resource_version"]
    assert stored["metadata"]["modified"] == app["metadata"]["modified"]
    stored["metadata"]["labels"] = {"tier": "gold"}
    answer = await http.put(f"{APP}/kept", json=stored)
    assert answer.json()["metadata"]["modified"] > app["metadata"]["modified"]


async def test_finalizers_alone_by_patch(http: httpx.AsyncClient, client: ShoalClient) -> None:
    app = await _create(http, "fin")
    stale = app["metadata"]["resource_version"]
    version = await client.set_finalizers(Application, "fin", "default", ["a.io/x", "b"], stale)
    got = (await http.get(f"{APP}/fin")).json()
    assert got["metadata"]["finalizers"] == ["a.io/x", "b"]
    assert got["metadata"]["resource_version"] == version
    assert got["metadata"]["modified"] == app["metadata"]["modified"]
    for body, status, field in (
        ({"metadata": {"finalizers": ["a"], "resource_version": stale}}, 409, None),
        ({"metadata": {"finalizers": ["no spaces"]}}, 422, "metadata.finalizers[0]"),
        ({"metadata": {"finalizers": ["a"], "labels": {}}}, 422, "metadata.labels"),
        ({"metadata": {"finalizers": ["a"]}, "spec": {}}, 422, "body"),
        ({"metadata": {}}, 422, "metadata.finalizers"),
    ):
        answer = await http.patch(f"{APP}/fin", json=body)
        assert answer.status_code == status, (body, answer.text)
        if field is not None:
            assert answer.json()["errors"][0]["field"] == field
    assert (await http.delete(f"{APP}/fin")).status_code == 200
    await client.set_finalizers(Application, "fin", "default", ["b"])
    assert (await http.get(f"{APP}/fin")).status_code == 200  # b still holds it
    await client.set_finalizers(Application, "fin", "default", [])
    assert (await http.get(f"{APP}/fin")).status_code == 404  # the last one went: removed

    many = await _create(http, "many")
    results = await client.set_finalizers_many(
        [
            {"namespace": "default", "name": "many", "finalizers": ["a"]},
            {"namespace": "default", "name": "many", "finalizers": ["b"], "resource_version": 1},
            {"namespace": "default", "name": "fin", "finalizers": []},
        ]
    )
    assert [r["status"] for r in results] == [200, 409, 404]
    got = (await http.get(f"{APP}/many")).json()
    assert got["metadata"]["finalizers"] == ["a"]
    assert got["metadata"]["modified"] == many["metadata"]["modified"]
    items = [{"namespace": "default", "name": "many", "finalizers": ["no spaces"]}]
    answer = await http.post("/scheduling/applicationfinalizers", json={"items": items})
    assert answer.status_code == 422


async def test_whole_status_put_of_a_krake_client_still_works(http: httpx.AsyncClient) -> None:
    app = await _create(http, "krake")
    app["status"]["state"] = "RUNNING"
    app["status"]["reason"] = {"code": "CLUSTER_NOT_REACHABLE", "message": "gone"}
    answer = await http.put(f"{APP}/krake/status", json=app)
    assert answer.status_code == 200, answer.text
    status = answer.json()["status"]
    assert (status["state"], status["reason"]["code"]) == ("RUNNING", "CLUSTER_NOT_REACHABLE")
    assert (status["deploy_state"], status["deploy_reason"]["code"]) == (
        "RUNNING",
        "CLUSTER_NOT_REACHABLE",
    )
    # a later field patch keeps what the Krake client said
    answer = await http.patch(f"{APP}/krake/status", json={"status": {"services": {"a": "b"}}})
    assert answer.json()["status"]["state"] == "RUNNING"


async def test_a_component_may_patch_only_its_own_fields(tmp_path: Path) -> None:
    server = await start_api(f"sqlite://{tmp_path / 'shoal.db'}", security=security(tmp_path))

    def as_user(user: str) -> httpx.AsyncClient:
        token = {"authorization": f"Bearer {TOKENS[user]}"}
        return httpx.AsyncClient(base_url=server.url, headers=token, timeout=30)

    try:
        async with as_user("admin") as admin, as_user("system:kube-controller") as kube:
            assert (await admin.post(APP, json=_app("x"))).is_success
            ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "c"}
            answer = await kube.patch(f"{APP}/x/status", json={"status": {"scheduled_to": ref}})
            assert answer.status_code == 403
            assert "status.scheduled_to" in answer.json()["detail"]
            answer = await kube.patch(f"{APP}/x/status", json={"status": {"running_on": ref}})
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"]["running_on"]["name"] == "c"
            items = [
                {"namespace": "default", "name": "x", "status": {"scheduled_to": ref}},
                {"namespace": "default", "name": "x", "status": {"retries": 2}},
            ]
            answer = await kube.post("/scheduling/applicationstatuses", json={"items": items})
            assert answer.status_code == 200, answer.text
            assert [r["status"] for r in answer.json()["results"]] == [403, 200]
            items = [{"namespace": "default", "name": "x", "finalizers": ["shoal.kube/resources"]}]
            answer = await kube.post("/scheduling/applicationfinalizers", json={"items": items})
            assert [r["status"] for r in answer.json()["results"]] == [200]
    finally:
        await server.stop()
