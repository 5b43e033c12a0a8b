"""References stay inside a namespace, and nothing of an invisible namespace shows: not in
items, page tokens, selector matches, nor in a scheduler's reason."""

from __future__ import annotations

from typing import Any

from shoal.api.auth.secrets import REDACTED
from tests.security.conftest import (
    Secured,
    application,
    cluster,
    eventually,
    grant,
    pages_of,
    role,
)

CLUSTER_A = {"api": "kubernetes", "kind": "Cluster", "namespace": "a", "name": "alice-cluster"}


async def _tenants(secured: Secured) -> None:
    for user, ns in (("alice", "a"), ("bob", "b")):
        client = secured[user]
        answer = await client.post(f"/kubernetes/namespaces/{ns}/clusters",
                                   json=cluster(f"{user}-cluster", ns))  # fmt: skip
        assert answer.status_code == 200, answer.text
        for i in range(3):
            body = application(f"{user}-app-{i}", ns)
            answer = await client.post(f"/kubernetes/namespaces/{ns}/applications", json=body)
            assert answer.status_code == 200, answer.text


async def test_a_binding_to_another_namespaces_cluster_is_refused(secured: Secured) -> None:
    await _tenants(secured)
    bob = secured["bob"]
    path = "/kubernetes/namespaces/b/applications/bob-app-0/binding"
    answer = await bob.put(path, json={"cluster": CLUSTER_A})
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"] == "cluster.namespace"
    item = {"namespace": "b", "name": "bob-app-1", "cluster": CLUSTER_A}
    answer = await bob.post("/scheduling/bindings", json={"bindings": [item]})
    assert [r["status"] for r in answer.json()["results"]] == [422]
    for name in ("bob-app-0", "bob-app-1"):
        app = (await bob.get(f"/kubernetes/namespaces/b/applications/{name}")).json()
        assert app["status"]["scheduled_to"] is None


async def test_a_cloud_binding_stays_in_the_namespace_and_names_a_cloud(
    secured: Secured,
) -> None:
    admin, bob = secured["admin"], secured["bob"]
    tosca = {"tosca_definitions_version": "tosca_simple_yaml_1_0",
             "topology_template": {"outputs": {"kubeconfig": {"value": "x"}}}}
    body = {"api": "kubernetes", "kind": "Cluster", "metadata": {"name": "to-build"},
            "spec": {"kubeconfig": {}, "tosca": tosca}}  # fmt: skip
    answer = await bob.post("/kubernetes/namespaces/b/clusters", json=body)
    assert answer.status_code == 200, answer.text
    cloud = {
        "api": "infrastructure",
        "kind": "Cloud",
        "metadata": {"name": "alice-cloud", "namespace": "a"},
        "spec": {"type": "openstack", "openstack": {
            "url": "https://keystone.example:5000/v3",
            "auth": {"type": "password", "password": {
                "version": "3",
                "user": {"username": "u", "password": "p", "domain_name": "Default"},
                "project": {"name": "p", "domain_id": "default"}}},
            "infrastructure_provider": {"name": "im"}}},
    }  # fmt: skip
    answer = await admin.post("/infrastructure/namespaces/a/clouds", json=cloud)
    assert answer.status_code == 200, answer.text
    path = "/kubernetes/namespaces/b/clusters/to-build/binding"
    refs: list[tuple[dict[str, Any], str]] = [
        ({"api": "infrastructure", "kind": "Cloud", "namespace": "a", "name": "alice-cloud"},
         "cloud.namespace"),
        ({"api": "infrastructure", "kind": "GlobalCloud", "name": "nowhere"}, "cloud.name"),
        ({"api": "infrastructure", "kind": "Cloud", "namespace": "b", "name": "nowhere"},
         "cloud.name"),
    ]  # fmt: skip
    for ref, field in refs:
        answer = await bob.put(path, json={"cloud": ref})
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"][0]["field"] == field


async def test_owners_and_events_stay_in_the_namespace(secured: Secured) -> None:
    bob = secured["bob"]
    body = application("owned", "b")
    body["metadata"]["owners"] = [CLUSTER_A]
    answer = await bob.post("/kubernetes/namespaces/b/applications", json=body)
    assert answer.status_code == 422, answer.text
    assert "metadata.owners[0].namespace" in answer.text
    event = {
        "api": "core", "kind": "Event", "metadata": {"name": "e1", "namespace": "b"},
        "involved_object": {"api": "kubernetes", "kind": "Application", "namespace": "a",
                            "name": "alice-app-0", "uid": None},
        "reason": "Forged", "message": "bob was here", "reporting_component": "bob",
        "type": "Normal", "count": 1, "first_timestamp": "2026-01-01T00:00:00Z",
        "last_timestamp": "2026-01-01T00:00:00Z", "expires": "2036-01-01T00:00:00Z",
    }  # fmt: skip
    answer = await bob.post("/core/namespaces/b/events", json=event)
    assert answer.status_code == 422, answer.text
    assert "involved_object.namespace" in answer.text


async def test_pages_and_selectors_tell_nothing_of_other_namespaces(secured: Secured) -> None:
    await _tenants(secured)
    bob = secured["bob"]
    seen: list[str] = []
    async for page, decoded in pages_of(bob, "/kubernetes/applications", most=10):
        seen += [item["metadata"]["name"] for item in page["items"]]
        assert "/a/" not in decoded and "alice" not in decoded, decoded
    assert seen == ["bob-app-0", "bob-app-1", "bob-app-2"]
    # a selector that only alice's objects match answers nothing, not a shorter page
    answer = await bob.get("/kubernetes/applications?field_selector=metadata.namespace=a")
    assert answer.json()["items"] == [] and not answer.json()["metadata"].get("continue")


async def test_a_selector_may_not_test_a_secret(secured: Secured) -> None:
    await _tenants(secured)
    verbs = ("get", "list", "list_all", "watch")
    await grant(secured["admin"], "alice", role("reader-b", "kubernetes", ("clusters",), ("b",),
                                                verbs))  # fmt: skip
    alice = secured["alice"]

    async def reads() -> bool:
        return (await alice.get("/kubernetes/namespaces/b/clusters")).status_code == 200

    await eventually(reads)
    assert (await alice.get("/kubernetes/namespaces/b/clusters/bob-cluster")).json()[
        "spec"]["kubeconfig"]["users"][0]["user"]["token"] == REDACTED  # fmt: skip
    for path in ("/kubernetes/namespaces/b/clusters", "/kubernetes/clusters"):
        for selector in ("spec.kubeconfig.users=x", "spec.kubeconfig=secret-token"):
            answer = await alice.get(path, params={"field_selector": selector})
            assert answer.status_code == 400, answer.text
            assert "secret field" in answer.json()["detail"]
            answer = await alice.get(path, params={"field_selector": selector, "watch": "true"})
            assert answer.status_code == 400, answer.text
