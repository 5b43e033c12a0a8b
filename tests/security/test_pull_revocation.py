"""Revoking a pull cluster's credential: deleting its Cluster, or an administrator's revoke,
refuses every credential issued before, at once, with a reason; a token made for the
cluster's name joins it again (a new agent) without registering it anew."""

from __future__ import annotations

import httpx
import orjson

from shoal.api.auth import jointokens
from tests.security.conftest import Secured, cluster
from tests.security.test_pull_clusters import CLUSTERS, as_cluster, join, joined, new_token
from tests.security.test_pull_copies import COPIES, copy_body

STATUS = {"status": {"state": "ONLINE", "heartbeat": "2026-01-01T00:00:00Z"}}


async def refused_everything(own: httpx.AsyncClient, name: str, why: str) -> None:
    """The credential reads and writes nothing of its cluster: 401 saying ``why``."""
    for method, path, body in (
        ("GET", f"{CLUSTERS}/{name}", None),
        ("PATCH", f"{CLUSTERS}/{name}/status", STATUS),
        ("POST", f"{CLUSTERS}/{name}/credential", None),
        ("GET", COPIES, None),
        ("GET", f"{COPIES}/web:{name}", None),
        ("PUT", f"{COPIES}/web:{name}/status", {"status": {"state": "RUNNING"}}),
    ):
        answer = await own.request(method, path, json=body)
        assert answer.status_code == 401, (method, path, answer.text)
        assert why in answer.json()["detail"], (method, path, answer.text)


async def test_deleting_a_pull_cluster_revokes_its_credential(secured: Secured) -> None:
    credential = await joined(secured, "edge-1")
    admin = secured["admin"]
    assert (await admin.post(COPIES, json=copy_body("web", "edge-1"))).status_code == 200
    async with as_cluster(secured, credential) as own:
        assert (await own.get(f"{COPIES}/web:edge-1")).status_code == 200
        assert (await admin.delete(f"{CLUSTERS}/edge-1")).status_code == 200
        await refused_everything(own, "edge-1", "credential revoked: cluster a/edge-1 was deleted")
        # registered again under its name (another uid): the old credential stays refused
        again = await admin.post(
            CLUSTERS, json={**cluster("edge-1", "a"), "spec": {"mode": "pull"}}
        )
        assert again.status_code == 200, again.text
        await refused_everything(own, "edge-1", "one of that name was registered since")


async def test_a_revoke_refuses_every_credential_issued_before(secured: Secured) -> None:
    credential = await joined(secured, "edge-1")
    admin = secured["admin"]
    assert (await admin.post(COPIES, json=copy_body("web", "edge-1"))).status_code == 200
    async with as_cluster(secured, credential) as own:
        renewed = await own.post(f"{CLUSTERS}/edge-1/credential")
        assert renewed.status_code == 200, renewed.text
    fresh = renewed.json()["credential"]
    revoked = await admin.delete(f"{CLUSTERS}/edge-1/credential")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json() == {"namespace": "a", "name": "edge-1", "generation": 1}
    for held in (credential, fresh):
        async with as_cluster(secured, held) as own:
            await refused_everything(own, "edge-1", "were revoked after it was issued")
    # the cluster and what is placed on it stay
    stored = await admin.get(f"{CLUSTERS}/edge-1")
    assert stored.status_code == 200 and stored.json()["metadata"]["deleted"] is None
    assert (await admin.get(f"{COPIES}/web:edge-1")).status_code == 200


async def test_who_may_revoke_a_cluster_credential(secured: Secured) -> None:
    credential = await joined(secured, "edge-1")
    path = f"{CLUSTERS}/edge-1/credential"
    assert (await secured.anonymous.delete(path)).status_code == 401
    refused = await secured["bob"].delete(path)  # no right in namespace a
    assert refused.status_code == 403
    assert "delete kubernetes/clusters/credential" in refused.json()["detail"]
    async with as_cluster(secured, credential) as own:
        itself = await own.delete(path)  # a stolen credential cannot lock its owner out
        assert itself.status_code == 403
        assert (await own.get(f"{CLUSTERS}/edge-1")).status_code == 200
    assert (await secured["alice"].delete(path)).status_code == 200  # every right in a
    assert (await secured["admin"].delete(f"{CLUSTERS}/nowhere/credential")).status_code == 404
    push = await secured["admin"].post(CLUSTERS, json=cluster("pushed", "a"))
    assert push.status_code == 200
    answer = await secured["admin"].delete(f"{CLUSTERS}/pushed/credential")
    assert answer.status_code == 409
    assert "push cluster" in answer.json()["detail"]


async def test_a_token_for_a_cluster_joins_it_again(secured: Secured) -> None:
    old = await joined(secured, "edge-1")
    admin = secured["admin"]
    before = (await admin.get(f"{CLUSTERS}/edge-1")).json()
    assert (await admin.post(COPIES, json=copy_body("web", "edge-1"))).status_code == 200
    token = await new_token(secured, cluster="edge-1")
    other = await join(secured, token, "edge-2")  # a token for edge-1 joins nothing else
    assert other.status_code == 401
    assert "made for cluster 'edge-1' only" in other.json()["detail"]
    assert (await admin.get(f"{CLUSTERS}/edge-2")).status_code == 404
    answer = await join(secured, token, "edge-1", labels={"location": "XX"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["user"] == "system:cluster:a/edge-1"
    after = (await admin.get(f"{CLUSTERS}/edge-1")).json()
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # the same Cluster
    assert after["metadata"]["labels"] == before["metadata"]["labels"]  # its labels kept
    async with as_cluster(secured, answer.json()["credential"]) as new:
        copies = await new.get(COPIES)
        assert [c["metadata"]["name"] for c in copies.json()["items"]] == ["web:edge-1"]
        renewed = await new.post(f"{CLUSTERS}/edge-1/credential")  # of the new generation
        assert renewed.status_code == 200, renewed.text
    async with as_cluster(secured, renewed.json()["credential"]) as again:
        assert (await again.get(f"{CLUSTERS}/edge-1")).status_code == 200
    async with as_cluster(secured, old) as gone:  # one agent per cluster: the old is revoked
        await refused_everything(gone, "edge-1", "were revoked after it was issued")
    assert (await join(secured, token, "edge-1")).status_code == 401  # used


async def test_a_token_for_a_cluster_joins_no_push_cluster(secured: Secured) -> None:
    assert (await secured["admin"].post(CLUSTERS, json=cluster("pushed", "a"))).status_code == 200
    token = await new_token(secured, cluster="pushed")
    refused = await join(secured, token, "pushed")
    assert refused.status_code == 409
    assert "push cluster" in refused.json()["detail"]
    records, _ = await secured.server.store.list(jointokens.PREFIX)  # given back unused
    assert [orjson.loads(r.value)["used"] for r in records] == [None]
    # a token for a name not registered (yet) registers it
    fresh = await join(secured, await new_token(secured, cluster="edge-9"), "edge-9")
    assert fresh.status_code == 200, fresh.text
    made = (await secured["admin"].get(f"{CLUSTERS}/edge-9")).json()
    assert made["spec"]["mode"] == "pull"
