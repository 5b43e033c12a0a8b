"""A pull cluster's copies on the secured API: its credential reads and answers its own
cluster's Copies and nothing else; no user writes a Copy (the kube controller does)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from tests.security.conftest import Secured
from tests.security.test_pull_clusters import as_cluster, joined

COPIES = "/kubernetes/namespaces/a/copies"


def copy_body(app: str, cluster: str) -> dict[str, Any]:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": app}, "spec": {"replicas": 1}}  # fmt: skip
    return {
        "api": "kubernetes", "kind": "Copy",
        "metadata": {"name": f"{app}:{cluster}", "finalizers": ["shoal.kube/copy"]},
        "spec": {"app_namespace": "a", "app_name": app, "app_uid": f"uid-{app}",
                 "cluster": {"api": "kubernetes", "kind": "Cluster", "namespace": "a",
                             "name": cluster},
                 "kube_namespace": "a", "manifest": [deployment]},
    }  # fmt: skip


async def two_copies(secured: Secured) -> None:
    for app, cluster in (("web", "edge-1"), ("db", "edge-2")):
        made = await secured["admin"].post(COPIES, json=copy_body(app, cluster))
        assert made.status_code == 200, made.text


async def watched(client: httpx.AsyncClient, path: str, until: str) -> list[str]:
    """The names a watch from the beginning shows, up to ``until`` (written last)."""
    names: list[str] = []
    async with client.stream("GET", path, params={"watch": "1", "resource_version": 1}) as answer:
        assert answer.status_code == 200, await answer.aread()
        async for line in answer.aiter_lines():
            event = orjson.loads(line) if line.strip() else {}
            name = ((event.get("object") or {}).get("metadata") or {}).get("name")
            if name:
                names.append(name)
            if name == until:
                return names
    return names


async def test_a_cluster_reads_only_its_own_copies(secured: Secured) -> None:
    credential = await joined(secured, "edge-1")
    await two_copies(secured)
    async with as_cluster(secured, credential) as own:
        assert (await own.get(f"{COPIES}/web:edge-1")).status_code == 200
        assert (await own.get(f"{COPIES}/db:edge-2")).status_code == 404
        listed = await own.get(COPIES)  # no selector: still only its own
        assert listed.status_code == 200
        assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["web:edge-1"]
        last = await secured["admin"].post(COPIES, json=copy_body("last", "edge-1"))
        assert last.status_code == 200
        assert await watched(own, COPIES, "last:edge-1") == ["web:edge-1", "last:edge-1"]
        # nor across namespaces, nor another namespace's
        assert (await own.get("/kubernetes/copies")).status_code == 403
        assert (await own.get("/kubernetes/namespaces/b/copies")).status_code == 403


async def test_a_cluster_answers_its_own_copies_only(secured: Secured) -> None:
    credential = await joined(secured, "edge-1")
    await two_copies(secured)
    async with as_cluster(secured, credential) as own:
        status = {"status": {"generation": 1, "ready": True, "ready_replicas": 1}}
        mine = await own.patch(f"{COPIES}/web:edge-1/status", json=status)
        assert mine.status_code == 200, mine.text
        assert mine.json()["status"]["ready"] is True
        theirs = await own.patch(f"{COPIES}/db:edge-2/status", json=status)
        assert theirs.status_code == 403
        stored = (await secured["admin"].get(f"{COPIES}/db:edge-2")).json()
        assert stored["status"]["ready"] is False


async def test_a_cluster_writes_no_copy_spec_and_creates_none(secured: Secured) -> None:
    credential = await joined(secured, "edge-1")
    await two_copies(secured)
    async with as_cluster(secured, credential) as own:
        current = (await own.get(f"{COPIES}/web:edge-1")).json()
        current["spec"]["manifest"][0]["spec"]["replicas"] = 50
        assert (await own.put(f"{COPIES}/web:edge-1", json=current)).status_code == 403
        created = await own.post(COPIES, json=copy_body("evil", "edge-1"))
        assert created.status_code == 403
        assert (await own.delete(f"{COPIES}/db:edge-2")).status_code == 403
        assert (await own.delete(f"{COPIES}/web:edge-1")).status_code == 403
    stored = (await secured["admin"].get(f"{COPIES}/web:edge-1")).json()
    assert stored["spec"]["manifest"][0]["spec"]["replicas"] == 1
    assert (await secured["admin"].get(f"{COPIES}/evil:edge-1")).status_code == 404


async def test_a_cluster_drops_the_finalizer_of_its_own_copies_only(secured: Secured) -> None:
    credential = await joined(secured, "edge-1")
    await two_copies(secured)
    for name in ("web:edge-1", "db:edge-2"):
        assert (await secured["admin"].delete(f"{COPIES}/{name}")).status_code == 200
    body = {"metadata": {"finalizers": []}}
    async with as_cluster(secured, credential) as own:
        theirs = await own.put(f"{COPIES}/db:edge-2/finalizers", json=body)
        assert theirs.status_code == 403
        mine = await own.put(f"{COPIES}/web:edge-1/finalizers", json=body)
        assert mine.status_code == 200, mine.text
    assert (await secured["admin"].get(f"{COPIES}/web:edge-1")).status_code == 404
    assert (await secured["admin"].get(f"{COPIES}/db:edge-2")).status_code == 200


async def test_users_read_copies_but_write_none(secured: Secured) -> None:
    await two_copies(secured)
    alice = secured["alice"]
    assert (await alice.get(f"{COPIES}/web:edge-1")).status_code == 200
    assert (await secured["bob"].get(f"{COPIES}/web:edge-1")).status_code == 403
    assert (await alice.post(COPIES, json=copy_body("mine", "edge-1"))).status_code == 403
    current = (await alice.get(f"{COPIES}/web:edge-1")).json()
    assert (await alice.put(f"{COPIES}/web:edge-1", json=current)).status_code == 403
    status = {"status": {"generation": 1, "ready": True}}
    assert (await alice.patch(f"{COPIES}/web:edge-1/status", json=status)).status_code == 403
    assert (await alice.delete(f"{COPIES}/web:edge-1")).status_code == 403


async def test_copies_created_in_batches_are_checked_per_item(secured: Secured) -> None:
    """The kube controller creates Copies in batches (``POST /kubernetes/copies``): a
    cluster's credential may not use the route, nor may a user whose role would let them
    create in the namespace (only the kube controller and administrators write Copies);
    an administrator's items are created."""
    credential = await joined(secured, "edge-1")

    def batch(*names: str) -> dict[str, Any]:
        items = [copy_body(name, "edge-1") for name in names]
        for item in items:
            item["metadata"]["namespace"] = "a"
        return {"items": items}

    async with as_cluster(secured, credential) as own:
        refused = await own.post("/kubernetes/copies", json=batch("evil"))
        assert refused.status_code == 403, refused.text
    # a user who may read the namespace's applications: refused, as for a single create
    answer = await secured["alice"].post("/kubernetes/copies", json=batch("mine"))
    assert answer.status_code == 403, answer.text
    assert "written by the kube controller" in answer.json()["detail"]
    made = await secured["admin"].post("/kubernetes/copies", json=batch("web", "db"))
    assert made.status_code == 200, made.text
    assert [r["status"] for r in made.json()["results"]] == [200, 200]
    for name in ("evil:edge-1", "mine:edge-1"):
        assert (await secured["admin"].get(f"{COPIES}/{name}")).status_code == 404
    stored = (await secured["admin"].get(f"{COPIES}/db:edge-1")).json()
    assert stored["spec"]["cluster"]["name"] == "edge-1"
