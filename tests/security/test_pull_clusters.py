"""Pull clusters on the secured API: join tokens, the exchange, and what a cluster's own
credential may do (its cluster, its status, its renewal) and may not (everything else)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from shoal.api.auth import clusters, jointokens
from shoal.api.auth.clusters import ClusterCredentials
from shoal.api.auth.secrets import load_keys
from tests.security.conftest import Secured, application, cluster

CLUSTERS = "/kubernetes/namespaces/a/clusters"


async def new_token(secured: Secured, user: str = "admin", namespace: str = "a",
                    **body: Any) -> str:
    answer = await secured[user].post(f"/kubernetes/namespaces/{namespace}/jointokens", json=body)
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["token"]
    assert jointokens.SHAPE.match(token)
    return token


async def join(secured: Secured, token: str, name: str, **extra: Any) -> httpx.Response:
    body = {"token": token, "name": name, **extra}
    return await secured.anonymous.post("/kubernetes/join", json=body)


def as_cluster(secured: Secured, credential: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=secured.server.url, headers={"authorization": f"Bearer {credential}"}, timeout=30
    )


async def joined(secured: Secured, name: str = "edge-1") -> str:
    answer = await join(secured, await new_token(secured), name, labels={"location": "DE"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["credential"])


async def test_a_join_registers_a_pull_cluster_without_kubeconfig(secured: Secured) -> None:
    token = await new_token(secured)
    answer = await join(secured, token, "edge-1", labels={"location": "DE"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["user"] == "system:cluster:a/edge-1"
    assert (body["namespace"], body["name"]) == ("a", "edge-1")
    stored = (await secured["admin"].get(f"{CLUSTERS}/edge-1")).json()
    assert stored["spec"]["mode"] == "pull"
    assert stored["spec"]["kubeconfig"] == {}
    assert stored["metadata"]["labels"] == {"location": "DE"}
    assert stored["status"]["state"] == "CONNECTING"
    async with as_cluster(secured, body["credential"]) as own:
        mine = await own.get(f"{CLUSTERS}/edge-1")
        assert mine.status_code == 200 and mine.json()["metadata"]["name"] == "edge-1"


async def test_the_store_keeps_only_the_tokens_hash(secured: Secured) -> None:
    token = await new_token(secured)
    records, _ = await secured.server.store.list(jointokens.PREFIX)
    assert len(records) == 1
    assert token.split(".")[1].encode() not in records[0].value
    # and no route reads tokens back
    listing = await secured["admin"].get("/kubernetes/namespaces/a/jointokens")
    assert listing.status_code in (404, 405)


async def test_a_used_token_registers_nothing_more(secured: Secured) -> None:
    token = await new_token(secured)
    assert (await join(secured, token, "edge-1")).status_code == 200
    again = await join(secured, token, "edge-2")
    assert again.status_code == 401
    assert "already used" in again.json()["detail"]
    assert (await secured["admin"].get(f"{CLUSTERS}/edge-2")).status_code == 404


async def test_an_expired_token_registers_nothing(secured: Secured) -> None:
    made = await jointokens.create(
        secured.server.store, "a", 60, "admin", clock=lambda: time.time() - 3600
    )
    answer = await join(secured, made.token, "edge-1")
    assert answer.status_code == 401
    assert answer.json()["detail"] == "token: expired"
    assert (await secured["admin"].get(f"{CLUSTERS}/edge-1")).status_code == 404


@pytest.mark.parametrize("token", ["abcdef.0123456789abcdef", "nonsense", "abcdef.012"])
async def test_an_unknown_or_malformed_token_registers_nothing(
    secured: Secured, token: str
) -> None:
    await new_token(secured)
    answer = await join(secured, token, "edge-1")
    assert answer.status_code == 401
    assert answer.json()["detail"].startswith("token: ")
    assert (await secured["admin"].get(f"{CLUSTERS}/edge-1")).status_code == 404


async def test_a_right_secret_of_another_id_is_refused(secured: Secured) -> None:
    first, second = await new_token(secured), await new_token(secured)
    forged = f"{first.split('.')[0]}.{second.split('.')[1]}"
    assert (await join(secured, forged, "edge-1")).status_code == 401


async def test_two_racing_joins_with_one_token_one_wins(secured: Secured) -> None:
    token = await new_token(secured)
    answers = await asyncio.gather(*(join(secured, token, f"edge-{i}") for i in range(4)))
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 401, 401, 401]
    listed = (await secured["admin"].get(CLUSTERS)).json()["items"]
    assert len(listed) == 1


async def test_a_taken_name_leaves_the_token_usable(secured: Secured) -> None:
    await joined(secured, "edge-1")
    token = await new_token(secured)
    taken = await join(secured, token, "edge-1")
    assert taken.status_code == 409
    assert taken.json()["errors"][0]["field"] == "name"
    assert (await join(secured, token, "edge-2")).status_code == 200


async def test_who_may_make_join_tokens(secured: Secured) -> None:
    await new_token(secured, "alice", "a")  # every right in namespace a
    refused = await secured["bob"].post("/kubernetes/namespaces/a/jointokens", json={})
    assert refused.status_code == 403
    anonymous = await secured.anonymous.post("/kubernetes/namespaces/a/jointokens", json={})
    assert anonymous.status_code == 401


async def test_a_token_lands_its_cluster_in_its_namespace(secured: Secured) -> None:
    token = await new_token(secured, "bob", "b")
    answer = await join(secured, token, "edge-1", namespace="a")  # not a field: dropped
    assert answer.status_code == 200
    assert answer.json()["namespace"] == "b"  # the namespace is the token's, not the joiner's
    assert (await secured["admin"].get("/kubernetes/namespaces/b/clusters/edge-1")).status_code \
        == 200
    assert (await secured["admin"].get(f"{CLUSTERS}/edge-1")).status_code == 404


async def test_a_pull_cluster_with_a_kubeconfig_is_refused(secured: Secured) -> None:
    body = cluster("edge-1", "a")
    body["spec"]["mode"] = "pull"
    answer = await secured["admin"].post(CLUSTERS, json=body)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "spec.kubeconfig"


async def test_a_push_cluster_shows_no_mode(secured: Secured) -> None:
    created = await secured["admin"].post(CLUSTERS, json=cluster("push-1", "a"))
    assert created.status_code == 200
    assert "mode" not in created.json()["spec"]  # Krake's shape while at its default


# the cluster's own credential ------------------------------------------------------------


async def test_the_cluster_writes_its_own_status_and_lease(secured: Secured) -> None:
    credential = await joined(secured)
    async with as_cluster(secured, credential) as own:
        patch = {"status": {"state": "ONLINE", "heartbeat": "2026-01-01T00:00:00Z",
                            "agent_version": "0.1.0", "custom_resources": []}}  # fmt: skip
        answer = await own.patch(f"{CLUSTERS}/edge-1/status", json=patch)
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"]["agent_version"] == "0.1.0"
        foreign = await own.patch(f"{CLUSTERS}/edge-1/status", json={"status": {"agent": "x"}})
        assert foreign.status_code == 403
        assert "status.agent" in foreign.json()["detail"]


async def test_each_denial_of_a_cluster_credential(secured: Secured) -> None:
    admin = secured["admin"]
    assert (await admin.post(CLUSTERS, json=cluster("other", "a"))).status_code == 200
    assert (await admin.post("/kubernetes/namespaces/b/clusters",
                             json=cluster("edge-1", "b"))).status_code == 200  # fmt: skip
    apps = "/kubernetes/namespaces/a/applications"
    assert (await admin.post(apps, json=application("app", "a"))).status_code == 200
    credential = await joined(secured)
    denied = [
        ("GET", f"{CLUSTERS}/other", None),  # another cluster
        ("GET", CLUSTERS, None),  # a list that shows the others
        ("GET", f"{CLUSTERS}?watch=1", None),
        ("GET", "/kubernetes/clusters", None),
        ("GET", "/kubernetes/namespaces/b/clusters/edge-1", None),  # its name elsewhere
        ("PATCH", f"{CLUSTERS}/other/status", {"status": {"state": "OFFLINE"}}),
        ("PUT", f"{CLUSTERS}/edge-1", cluster("edge-1", "a")),  # its own spec
        ("DELETE", f"{CLUSTERS}/edge-1", None),
        ("GET", f"{apps}/app", None),  # applications
        ("GET", apps, None),
        ("POST", apps, application("mine", "a")),
        ("GET", "/core/roles", None),
        ("POST", "/core/events", {"items": []}),
        ("POST", "/kubernetes/namespaces/a/jointokens", {}),  # tokens for more clusters
        ("POST", f"{CLUSTERS}/other/credential", None),  # another cluster's credential
        ("POST", "/scheduling/bindings", {"bindings": []}),
        ("GET", "/metrics", None),
    ]
    async with as_cluster(secured, credential) as own:
        for method, path, body in denied:
            answer = await own.request(method, path, json=body)
            assert answer.status_code == 403, (method, path, answer.status_code, answer.text)
        # no impersonation either
        answer = await own.get(f"{CLUSTERS}/other", headers={"impersonate-user": "admin"})
        assert answer.status_code == 403
        # its own Cluster shows no secret
        own_cluster = await own.get(f"{CLUSTERS}/edge-1")
        assert own_cluster.status_code == 200


async def test_no_binding_widens_a_cluster_credential(secured: Secured) -> None:
    """A role bound to every authenticated user reaches no cluster identity."""
    admin = secured["admin"]
    rule = {"api": "*", "resources": ["*"], "namespaces": ["*"], "verbs": ["*"]}
    role = {"api": "core", "kind": "Role", "metadata": {"name": "readers"}, "rules": [rule]}
    assert (await admin.post("/core/roles", json=role)).status_code == 200
    binding = {"api": "core", "kind": "RoleBinding", "metadata": {"name": "readers"},
               "users": ["group:system:authenticated"], "roles": ["readers"]}  # fmt: skip
    assert (await admin.post("/core/rolebindings", json=binding)).status_code == 200
    assert (await admin.post(CLUSTERS, json=cluster("other", "a"))).status_code == 200
    credential = await joined(secured)

    async with as_cluster(secured, credential) as own:
        async def bound() -> bool:  # the binding reaches users: bob reads namespace a
            return (await secured["bob"].get(f"{CLUSTERS}/other")).status_code == 200

        deadline = time.monotonic() + 10
        while not await bound():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert (await own.get(f"{CLUSTERS}/other")).status_code == 403
        assert (await own.get(CLUSTERS)).status_code == 403


async def test_renewal_gives_a_fresh_credential_to_its_cluster_only(secured: Secured) -> None:
    credential = await joined(secured)
    async with as_cluster(secured, credential) as own:
        renewed = await own.post(f"{CLUSTERS}/edge-1/credential")
        assert renewed.status_code == 200, renewed.text
        fresh = renewed.json()["credential"]
        assert fresh != credential and renewed.json()["user"] == "system:cluster:a/edge-1"
    async with as_cluster(secured, fresh) as again:
        assert (await again.get(f"{CLUSTERS}/edge-1")).status_code == 200
    admin = await secured["admin"].post(f"{CLUSTERS}/edge-1/credential")
    assert admin.status_code == 403  # a credential of a cluster comes from that cluster


async def test_a_credential_outlives_neither_its_expiry_nor_its_cluster(
    secured: Secured, tmp_path: Any
) -> None:
    credential = await joined(secured)
    ring = load_keys(tmp_path / "secrets.key", None)
    assert ring is not None
    old = ClusterCredentials(ring, 3600, clock=lambda: time.time() - 7200)
    expired = old.issue("a", "edge-1", "any").token
    async with as_cluster(secured, expired) as late:
        assert (await late.get(f"{CLUSTERS}/edge-1")).status_code == 401
    forged = ClusterCredentials([b"x" * 32], 3600).issue("a", "edge-1", "any").token
    async with as_cluster(secured, forged) as other:
        assert (await other.get(f"{CLUSTERS}/edge-1")).status_code == 401
    # deleted, and registered again by an administrator: the old credential renews nothing
    assert (await secured["admin"].delete(f"{CLUSTERS}/edge-1")).status_code == 200
    async with as_cluster(secured, credential) as own:
        renewed = await own.post(f"{CLUSTERS}/edge-1/credential")
        assert renewed.status_code == 401  # refused before the route (test_pull_revocation)
        assert "credential revoked" in renewed.json()["detail"]


async def test_a_rule_on_a_field_naming_the_cluster_is_one_entry(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a kind placed on clusters adds: one rule naming the field. Lists show the
    cluster's own objects, a read of another's is a 404, a write to another's a 403."""
    placed = ("status", "scheduled_to", "name")
    rules = (
        *clusters.OWN_RULES,
        clusters.OwnRule("kubernetes", "applications", frozenset({"get", "list"}), placed),
        clusters.OwnRule("kubernetes", "applications/status", frozenset({"update"}), placed),
    )
    monkeypatch.setattr(clusters, "OWN_RULES", rules)
    admin = secured["admin"]
    assert (await admin.post(CLUSTERS, json=cluster("other", "a"))).status_code == 200
    credential = await joined(secured, "edge-1")
    apps = "/kubernetes/namespaces/a/applications"
    for name, on in (("mine", "edge-1"), ("theirs", "other")):
        assert (await admin.post(apps, json=application(name, "a"))).status_code == 200
        ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "a", "name": on}
        body = {"api": "kubernetes", "kind": "ClusterBinding", "cluster": ref}
        bound = await admin.put(f"{apps}/{name}/binding", json=body)
        assert bound.status_code == 200, bound.text
    async with as_cluster(secured, credential) as own:
        listed = await own.get(apps)
        assert listed.status_code == 200
        assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["mine"]
        assert (await own.get(f"{apps}/mine")).status_code == 200
        assert (await own.get(f"{apps}/theirs")).status_code == 404
        write = {"status": {"deploy_state": "RUNNING"}}
        theirs = await own.patch(f"{apps}/theirs/status", json=write)
        assert theirs.status_code == 403 and "not its own cluster's" in theirs.json()["detail"]
        assert (await own.get("/kubernetes/namespaces/b/applications")).status_code == 403
