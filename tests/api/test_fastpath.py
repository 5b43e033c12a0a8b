"""The lean endpoints: answered before FastAPI's router, documented by its routes."""

from __future__ import annotations

import httpx
import orjson

from shoal.api.app import create_app
from shoal.store.sqlite import SqliteStore

POD = {
    "api": "scheduling",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
}


async def test_every_lean_endpoint_serves_a_documented_route() -> None:
    """A lean endpoint stands in for a FastAPI route of the same path and method, which
    documents it in /openapi.json; one without would be served and never described."""
    store = SqliteStore(":memory:")
    app = create_app(store)
    paths = app.openapi()["paths"]
    assert len(app.fast_routes) >= 9
    for route in app.fast_routes:
        documented = {method.upper() for method in paths.get(route.path, {})}
        assert route.methods - {"HEAD"} <= documented, route.path
    await store.close()


async def test_a_fleet_pod_and_its_status_batch(http: httpx.AsyncClient) -> None:
    """The fleet's hot writes: a pod's create, then its status in a batch, on its uid."""
    path = "/scheduling/namespaces/default/pods"
    created = await http.post(path, json=POD)
    assert created.status_code == 200, created.text
    pod = created.json()
    assert pod["metadata"]["namespace"] == "default" and pod["metadata"]["uid"]
    again = await http.post(path, json=POD)
    assert again.status_code == 409
    item = {"namespace": "default", "name": "p", "status": {"phase": "Scheduled"}}
    batch = {"items": [{**item, "uid": pod["metadata"]["uid"]}, {**item, "uid": "other"}]}
    answer = await http.post("/scheduling/podstatuses", json=batch)
    assert answer.status_code == 200, answer.text
    assert [r["status"] for r in answer.json()["results"]] == [200, 404]
    stored = (await http.get(f"{path}/p")).json()
    assert stored["status"]["phase"] == "Scheduled"
    headers = {"content-type": "application/json"}
    for target, body, status, field in (
        ("/scheduling/namespaces/-no-such/pods", orjson.dumps(POD), 422, "namespace"),
        (path, b"{", 400, "body"),
        (path, orjson.dumps({**POD, "spec": {}}), 422, "spec.containers"),
        ("/scheduling/podstatuses", orjson.dumps({"items": [item]}), 422, "items[0].uid"),
    ):
        answer = await http.post(target, content=body, headers=headers)
        assert answer.status_code == status, (target, answer.text)
        assert answer.json()["errors"][0]["field"] == field, answer.text
