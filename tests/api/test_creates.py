"""Creates in batches (``POST /kubernetes/applications``): one request and one commit, each
item checked as a single create is, one result per item in order."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from shoal.api.auth.secrets import paths_of_resource
from shoal.client.rest import Conflict, Invalid, ShoalClient
from shoal.model.kubernetes import Application
from shoal.model.registry import BATCH_CREATES
from tests.api.conftest import start_watch

PATH = "/kubernetes/applications"


def app(name: str, namespace: str | None = "a", **spec: Any) -> dict[str, Any]:
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}]
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": metadata,
        "spec": {"manifest": manifest, **spec},
    }


async def test_each_item_is_created_or_refused_on_its_own(http: httpx.AsyncClient) -> None:
    assert (await http.post("/kubernetes/namespaces/a/applications", json=app("old"))).is_success
    watch = await start_watch(http, PATH)
    items = [
        app("one"),
        app("two", "b"),
        app("bad", manifest="not a list"),
        app("old"),  # exists
        app("nowhere", None),
        app("one"),  # twice in one batch: the second is refused
        app("three"),
    ]
    answer = await http.post(PATH, json={"items": items})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [(r["namespace"], r["name"], r["status"]) for r in results] == [
        ("a", "one", 200),
        ("b", "two", 200),
        ("a", "bad", 422),
        ("a", "old", 409),
        (None, "nowhere", 422),
        ("a", "one", 409),
        ("a", "three", 200),
    ]
    assert [e["field"] for e in results[2]["errors"]] == ["spec.manifest"]
    assert results[3]["title"] == "RESOURCE_ALREADY_EXISTS"
    reason = "required: an item of a batch names its namespace"
    assert results[4]["errors"] == [{"field": "metadata.namespace", "reason": reason}]
    # Each created item's result is the object as stored, at its revision.
    for result in (results[0], results[1], results[6]):
        namespace, name = result["namespace"], result["name"]
        stored = (await http.get(f"/kubernetes/namespaces/{namespace}/applications/{name}")).json()
        assert result["object"] == stored
        assert result["resource_version"] == stored["metadata"]["resource_version"]
        assert stored["metadata"]["uid"] and stored["status"]["state"] == "PENDING"
    # One commit: the three creates, and nothing of the refused ones, reach a watcher.
    while len(watch.events) < 3:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    await watch.stop()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in watch.events] == [
        ("ADDED", "one"),
        ("ADDED", "two"),
        ("ADDED", "three"),
    ]
    listed = (await http.get(PATH)).json()["items"]
    assert sorted(i["metadata"]["name"] for i in listed) == ["old", "one", "three", "two"]


async def test_a_dry_run_checks_each_item_and_stores_nothing(http: httpx.AsyncClient) -> None:
    answer = await http.post(
        PATH, params={"dry_run": "true"}, json={"items": [app("x"), app("y", manifest=1)]}
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [200, 422]
    assert results[0]["resource_version"] is None
    assert results[0]["object"]["metadata"]["name"] == "x"
    assert (await http.get(PATH)).json()["items"] == []


async def test_bad_batch_bodies_are_refused_by_field(http: httpx.AsyncClient) -> None:
    headers = {"content-type": "application/json"}
    too_many = {"items": [app(f"a{i}") for i in range(1001)]}
    for body, status, field in (
        (b"{", 400, "body"),
        (b"[]", 400, "body"),
        (orjson.dumps({"items": "x"}), 422, "items"),
        (orjson.dumps({"items": [1]}), 422, "items[0]"),
        (orjson.dumps({}), 422, "items"),
        (orjson.dumps(too_many), 422, "items"),
    ):
        answer = await http.post(PATH, content=body, headers=headers)
        assert answer.status_code == status, (body[:40], answer.text)
        assert answer.json()["errors"][0]["field"] == field, answer.text
    assert (await http.get(PATH)).json()["items"] == []


def test_the_kinds_created_in_batches_have_no_secrets() -> None:
    """A batch's answer shows each object as written: no secret field to hide."""
    assert BATCH_CREATES
    for kind in BATCH_CREATES.values():
        assert paths_of_resource(kind.api_name(), kind.plural) is None, kind


async def test_the_client_creates_in_chunks_and_answers_per_object(client: ShoalClient) -> None:
    objects = [Application.model_validate(app(f"c{i}")) for i in range(5)]
    await client.create(objects[3])
    sent: list[int] = []
    request = client.request

    async def counted(method: str, path: str, **kw: Any) -> Any:
        sent.append(len(orjson.dumps(kw.get("body"))))
        return await request(method, path, **kw)

    client.request = counted  # type: ignore[method-assign]
    answers = await client.create_many(objects, chunk=2)
    assert len(sent) == 3  # 2 + 2 + 1
    sent.clear()
    size = len(orjson.dumps(objects[0].model_dump(mode="json")))
    more = [Application.model_validate(app(f"s{i}")) for i in range(4)]
    assert len(await client.create_many(more, max_bytes=2 * size + 10)) == 4
    assert len(sent) == 2 and all(n < 2 * size + 40 for n in sent)  # by size: 2 + 2
    client.request = request  # type: ignore[method-assign]
    assert [type(a).__name__ for a in answers] == ["Application"] * 3 + ["Conflict", "Application"]
    assert isinstance(answers[3], Conflict)
    created = [a for a in answers if isinstance(a, Application)]
    assert all(a.metadata.uid and a.metadata.resource_version for a in created)
    listed = await client.list(Application, "a")
    names = sorted(a.metadata.name for a in listed.items)
    assert names == [f"c{i}" for i in range(5)] + [f"s{i}" for i in range(4)]
    bad = Application.model_validate(app("bad"))
    bad.metadata.namespace = "Not A Name"
    (refused,) = await client.create_many([bad])
    assert isinstance(refused, Invalid) and "metadata.namespace" in refused.detail
