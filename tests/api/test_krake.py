"""A Krake client, as written for Krake, works against Shoal unchanged.

Only httpx and json here, no Shoal code: Krake's routes, JSON bodies with enum
names, metadata without ``resource_version`` (Krake's metadata has none, so its
updates are unconditional), and its ndjson watch stream.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.api.samples import SAMPLES


def krake_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """Metadata as a Krake client holds it: Krake's fields only."""
    keep = (
        "name",
        "namespace",
        "labels",
        "inherit_labels",
        "finalizers",
        "uid",
        "created",
        "modified",
        "deleted",
        "owners",
    )
    return {k: v for k, v in obj["metadata"].items() if k in keep}


async def test_krake_client_round_trip_of_every_kind(http: httpx.AsyncClient) -> None:
    for sample in SAMPLES:
        ns = "krake" if sample.namespaced else None
        base = (
            f"/{sample.api}/namespaces/krake/{sample.plural}"
            if ns
            else f"/{sample.api}/{sample.plural}"
        )
        events: list[dict[str, Any]] = []

        async def watch(base: str = base, events: list[dict[str, Any]] = events) -> None:
            async with http.stream("GET", base, params={"watch": ""}, timeout=None) as response:
                assert response.headers["content-type"].startswith("application/x-ndjson")
                async for line in response.aiter_lines():
                    if line.strip():
                        events.append(json.loads(line))

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.05)  # Krake's watch has no start marker either
        try:
            body = sample.body("krake-obj", ns)
            response = await http.post(
                base, content=json.dumps(body), headers={"Content-Type": "application/json"}
            )
            assert response.status_code in (200, 201), (sample.kind, response.text)
            created = response.json()
            assert created["metadata"]["uid"]

            listed = (await http.get(base)).json()
            assert listed["kind"] == f"{sample.kind}List"
            assert [i["metadata"]["name"] for i in listed["items"]] == ["krake-obj"]
            if sample.namespaced:
                every = (await http.get(f"/{sample.api}/{sample.plural}")).json()
                assert [i["metadata"]["name"] for i in every["items"]] == ["krake-obj"]

            # Krake update: the object it read, changed, sent back without resource_version
            obj = (await http.get(f"{base}/krake-obj")).json()
            update = {k: v for k, v in obj.items() if k != "status"}
            update["metadata"] = krake_metadata(obj)
            update["metadata"]["labels"] = {"managed-by": "krake"}
            sample.change(update)
            response = await http.put(f"{base}/krake-obj", json=update)
            assert response.status_code == 200, (sample.kind, response.text)
            assert response.json()["metadata"]["labels"] == {"managed-by": "krake"}
            # ...and again with the same (older) body: still unconditional
            update["metadata"]["labels"] = {"managed-by": "krake", "n": "2"}
            response = await http.put(f"{base}/krake-obj", json=update)
            assert response.status_code == 200, (sample.kind, response.text)

            if "status" in sample.subresources:
                obj = (await http.get(f"{base}/krake-obj")).json()
                obj["metadata"] = krake_metadata(obj)
                if sample.kind == "Application":
                    obj["status"]["state"] = "RUNNING"
                    obj["status"]["reason"] = {"code": "RESOURCE_NOT_FOUND", "message": "x"}
                elif sample.kind == "Cluster":
                    obj["status"]["state"] = "ONLINE"
                response = await http.put(f"{base}/krake-obj/status", json=obj)
                assert response.status_code == 200, (sample.kind, response.text)
                status = response.json()["status"]
                if sample.kind == "Application":
                    assert status["state"] == "RUNNING"
                    assert status["reason"]["code"] == "RESOURCE_NOT_FOUND"  # a name, not 12

            response = await http.delete(f"{base}/krake-obj")
            assert response.status_code == 200, (sample.kind, response.text)
            assert (await http.get(f"{base}/krake-obj")).status_code == 404

            for _ in range(200):
                if events and events[-1]["type"] == "DELETED":
                    break
                await asyncio.sleep(0.01)
            types = [e["type"] for e in events]
            assert types[0] == "ADDED" and types[-1] == "DELETED", (sample.kind, types)
            assert set(types[1:-1]) <= {"MODIFIED"}
            assert all(e["object"]["kind"] == sample.kind for e in events)
        finally:
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass


async def test_krake_enum_numbers_are_read_but_names_are_written(http: httpx.AsyncClient) -> None:
    sample = next(s for s in SAMPLES if s.kind == "Application")
    base = "/kubernetes/namespaces/krake/applications"
    await http.post(base, json=sample.body("web", "krake"))
    obj = (await http.get(f"{base}/web")).json()
    obj["status"]["reason"] = {"code": 12, "message": "numbers from old clients"}
    response = await http.put(f"{base}/web/status", json=obj)
    assert response.status_code == 200, response.text
    assert response.json()["status"]["reason"]["code"] == "RESOURCE_NOT_FOUND"
