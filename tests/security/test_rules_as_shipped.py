"""Rules' groups and namespaces, on the API as ``shoal up`` ships it: a component's rule
on one API group opens nothing in another, and ``namespaces: []`` opens the cluster-wide
objects of its resources but no namespace."""

from __future__ import annotations

from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import Role, RoleBinding, RoleRule
from shoal.testing.wait import wait_for
from tests.conftest import HttpOf
from tests.security.conftest import application, role


async def test_the_agents_scheduling_rule_does_not_reach_core(
    http_of: HttpOf,
) -> None:
    agent, admin = http_of("agent"), http_of("admin")
    body = role("readers", "kubernetes", ("applications",), ("a",), ("get",))
    assert (await admin.post("/core/roles", json=body)).status_code == 200
    # its rule is scheduling/* with update: every scheduling resource, nothing else
    assert (await agent.get("/scheduling/namespaces/a/pods")).status_code == 200
    for method, path, sent in (
        ("PUT", "/core/roles/readers", {**body, "rules": [{"api": "*", "resources": ["*"],
                                                            "namespaces": ["*"],
                                                            "verbs": ["*"]}]}),
        ("POST", "/core/roles", role("mine")),
        ("GET", "/core/roles", None),
        ("PUT", "/kubernetes/namespaces/a/applications/x", application("x", "a")),
    ):
        answer = await agent.request(method, path, json=sent)
        assert answer.status_code == 403, (method, path, answer.text)
    stored = (await admin.get("/core/roles/readers")).json()
    assert stored["rules"][0]["verbs"] == ["get"]  # untouched


async def test_a_rule_without_namespaces_opens_none(
    client: ShoalClient, http_of: HttpOf
) -> None:
    admin, alice = http_of("admin"), http_of("alice")
    for namespace in ("a", "b"):
        answer = await admin.post(f"/kubernetes/namespaces/{namespace}/applications",
                                  json=application("web", namespace))  # fmt: skip
        assert answer.status_code == 200
    rules = [
        RoleRule(api="kubernetes", resources=["applications"], namespaces=[], verbs=["*"]),
        RoleRule(api="core", resources=["globalmetrics"], namespaces=[], verbs=["list"]),
    ]
    await client.create(Role(metadata=Metadata(name="no-namespace"), rules=rules))
    await client.create(RoleBinding(metadata=Metadata(name="no-namespace"), users=["alice"],
                                    roles=["no-namespace"]))  # fmt: skip

    async def applied() -> bool:  # the cluster-wide half of her role: global metrics
        return (await alice.get("/core/globalmetrics")).status_code == 200

    await wait_for(applied, message="alice's role applied")
    for namespace in ("a", "b", "default"):
        path = f"/kubernetes/namespaces/{namespace}/applications"
        assert (await alice.get(path)).status_code == 403, namespace
        assert (await alice.get(f"{path}/web")).status_code == 403, namespace
        answer = await alice.post(path, json=application("x", namespace))
        assert answer.status_code == 403, namespace
    # nor across namespaces: no namespace to list
    assert (await alice.get("/kubernetes/applications")).status_code == 403
