"""RBAC: Krake's rules, subresources as resources, cluster-wide kinds, the index follows changes."""

from __future__ import annotations

from tests.security.conftest import Secured, application, binding, eventually, grant, role


async def test_without_credentials_every_route_but_health_is_401(secured: Secured) -> None:
    anonymous = secured.anonymous
    for path in ("/healthz", "/readyz", "/ui/"):
        assert (await anonymous.get(path)).status_code == 200  # the dashboard's files: no data
    for path in (
        "/metrics",
        "/openapi.json",
        "/kubernetes/applications",
        "/kubernetes/namespaces/a/applications",
        "/core/roles",
        "/scheduling/rescheduletasks",
        "/no/such/route",
    ):
        answer = await anonymous.get(path)
        assert answer.status_code == 401, path
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.headers["www-authenticate"].startswith("Bearer")
    answer = await anonymous.post(
        "/kubernetes/namespaces/a/applications", json=application("x", "a")
    )
    assert answer.status_code == 401


async def test_unknown_token_is_401_not_anonymous(secured: Secured) -> None:
    answer = await secured.anonymous.get(
        "/kubernetes/namespaces/a/applications", headers={"authorization": "Bearer nope"}
    )
    assert answer.status_code == 401
    answer = await secured.anonymous.get("/healthz", headers={"authorization": "Basic eDp5"})
    assert answer.status_code == 200


async def test_rights_in_one_namespace_only(secured: Secured) -> None:
    alice = secured["alice"]
    assert (
        await alice.post("/kubernetes/namespaces/a/applications", json=application("w", "a"))
    ).status_code == 200
    answer = await alice.post("/kubernetes/namespaces/b/applications", json=application("w", "b"))
    assert answer.status_code == 403
    assert answer.json()["title"] == "FORBIDDEN"
    # cluster-wide kinds are not granted by a rule that names namespaces
    assert (await alice.get("/core/roles")).status_code == 403
    assert (
        await alice.post("/core/rolebindings", json=binding("x", ["alice"], ["shoal-admin"]))
    ).status_code == 403


async def test_subresources_are_resources(secured: Secured) -> None:
    admin = secured["admin"]
    creator = role("creator", "kubernetes", ("applications",), ("c",), ("create", "get"))
    await grant(admin, "bob", creator)
    bob = secured["bob"]

    async def may_create() -> bool:
        answer = await bob.post("/kubernetes/namespaces/c/applications", json=application("x", "c"))
        return answer.status_code == 200

    await eventually(may_create)
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "c", "name": "c1"}
    answer = await bob.put("/kubernetes/namespaces/c/applications/x/binding", json={"cluster": ref})
    assert answer.status_code == 403
    batch = {"bindings": [{"namespace": "c", "name": "x", "cluster": ref}]}
    answer = await bob.post("/scheduling/bindings", json=batch)  # answered per item
    assert answer.status_code == 200
    assert [r["status"] for r in answer.json()["results"]] == [403]
    assert (
        await bob.put("/kubernetes/namespaces/c/applications/x/status", json=application("x", "c"))
    ).status_code == 403
    assert (await bob.delete("/kubernetes/namespaces/c/applications/x")).status_code == 403
    assert (await bob.get("/kubernetes/namespaces/c/applications/x")).status_code == 200


async def test_bindings_follow_changes_groups_are_subjects(secured: Secured) -> None:
    admin, alice = secured["admin"], secured["alice"]
    assert (await alice.get("/kubernetes/namespaces/b/applications")).status_code == 403
    body = binding("b-by-group", ["group:system:authenticated"], ["tenant-b"])
    assert (await admin.post("/core/rolebindings", json=body)).status_code == 200

    async def allowed() -> bool:
        return (await alice.get("/kubernetes/namespaces/b/applications")).status_code == 200

    await eventually(allowed)
    assert (await admin.delete("/core/rolebindings/b-by-group")).status_code == 200

    async def denied() -> bool:
        return (await alice.get("/kubernetes/namespaces/b/applications")).status_code == 403

    await eventually(denied)


async def test_default_roles_exist(secured: Secured) -> None:
    names = {
        r["metadata"]["name"] for r in (await secured["admin"].get("/core/roles")).json()["items"]
    }
    assert {"shoal-admin", "shoal-scheduler", "shoal-kube-controller", "shoal-agent"} <= names
