"""Who may act for whom (``Impersonate-User``, ``Impersonate-Group``), on the API as
``shoal up`` ships it, and what the request may then do.

Acting for someone takes the ``impersonate`` verb on ``core/users`` (and on ``core/groups``
for each group) from a rule that opens cluster-wide objects (``namespaces`` empty, ``*`` or
``""``): users belong to no namespace, so a right in one namespace lets no one act for
anyone, anywhere. A rule's ``names`` limits whom it acts as. The request then has the
rights of the user it acts for, and only those: never the caller's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import Role, RoleBinding, RoleRule
from shoal.model.kubernetes import Application
from shoal.testing import shipped
from shoal.testing.wait import wait_for
from tests.conftest import Tenant
from tests.security.conftest import application

Caller = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def caller(api: ApiServer) -> AsyncIterator[Caller]:
    """``caller(user, act_as=None, groups=())``: an HTTP client of ``user`` (its shipped
    token) whose requests act for ``act_as`` when one is named."""
    made: list[httpx.AsyncClient] = []

    def make(user: str, act_as: str | None = None, groups: tuple[str, ...] = ()) -> Any:
        headers = {"authorization": f"Bearer {shipped.token(user)}"}
        if act_as is not None:
            headers["impersonate-user"] = act_as
        if groups:
            headers["impersonate-group"] = ",".join(groups)
        made.append(httpx.AsyncClient(base_url=api.url, headers=headers, timeout=30))
        return made[-1]

    try:
        yield make
    finally:
        for each in made:
            await each.aclose()


async def bind(admin: ShoalClient, name: str, subject: str, *rules: RoleRule) -> None:
    await admin.create(Role(metadata=Metadata(name=name), rules=list(rules)))
    await admin.create(RoleBinding(metadata=Metadata(name=name), users=[subject], roles=[name]))


def impersonate(*namespaces: str, resource: str = "users", names: tuple[str, ...] = ()) -> RoleRule:
    return RoleRule(api="core", resources=[resource], namespaces=list(namespaces),
                    verbs=["impersonate"], names=list(names))  # fmt: skip


def audited(uri: str) -> list[dict[str, Any]]:
    """The shipped API's audit lines of ``uri``."""
    lines = Path(shipped.security().audit or "").read_bytes().splitlines()
    return [e for e in map(orjson.loads, lines) if e["uri"] == uri]


async def status_of(client: httpx.AsyncClient, path: str) -> int:
    return (await client.get(path)).status_code


APPS_A, APPS_B = "/kubernetes/namespaces/a/applications", "/kubernetes/namespaces/b/applications"


async def test_a_tenant_may_not_act_for_anyone(tenant: Tenant, caller: Caller) -> None:
    await tenant("alice", "a")
    await tenant("bob", "b")
    for act_as in ("bob", "admin", "system:kube-controller", "alice"):
        for path in (APPS_A, APPS_B, "/core/roles"):
            answer = await caller("alice", act_as).get(path)
            assert answer.status_code == 403, (act_as, path)
            assert answer.json()["detail"] == f"user 'alice' may not impersonate user {act_as!r}"
    # with the groups alone, the same
    answer = await caller("alice", "alice", ("shoal:admins",)).get("/core/roles")
    assert answer.status_code == 403
    # her own requests still pass
    assert await status_of(caller("alice"), APPS_A) == 200


async def test_an_impersonate_right_in_one_namespace_opens_nothing(
    client: ShoalClient, tenant: Tenant, caller: Caller
) -> None:
    await tenant("alice", "a")
    await tenant("bob", "b")
    reads_c = RoleRule(api="kubernetes", resources=["applications"], namespaces=["c"],
                       verbs=["list"])  # fmt: skip
    await bind(client, "bob-acts-in-a", "bob", impersonate("a"), impersonate("b"), reads_c)

    async def applied() -> bool:  # the API applies his new role: he reads namespace c
        return await status_of(caller("bob"), "/kubernetes/namespaces/c/applications") == 200

    await wait_for(applied, message="bob's role applied")
    for act_as in ("alice", "admin"):
        for path in (APPS_A, APPS_B, "/core/roles"):
            assert await status_of(caller("bob", act_as), path) == 403, (act_as, path)
    assert (await caller("bob", "alice").post(APPS_A, json=application("w", "a"))).status_code \
        == 403
    assert await status_of(caller("bob"), APPS_B) == 200


@pytest.mark.parametrize("namespaces", [(), ("*",), ("",)], ids=["[]", "[*]", "['']"])
async def test_a_cluster_wide_impersonate_right_acts_with_the_others_rights_only(
    client: ShoalClient, tenant: Tenant, caller: Caller, namespaces: tuple[str, ...]
) -> None:
    alice = await tenant("alice", "a")
    await tenant("bob", "b")
    await bind(client, "bob-acts", "bob", impersonate(*namespaces))
    as_alice = caller("bob", "alice")

    async def acting() -> bool:
        return await status_of(as_alice, APPS_A) == 200

    await wait_for(acting, message="bob acts for alice")
    # alice's rights, and not bob's own
    assert await status_of(as_alice, APPS_B) == 403
    assert await status_of(as_alice, "/core/roles") == 403
    answer = await as_alice.post(APPS_A, json=application("made-for-alice", "a"))
    assert answer.status_code == 200
    assert (await alice.get(Application, "made-for-alice", "a")).metadata.name == "made-for-alice"
    # the audit names both: who it acted for, who sent it
    path = f"{APPS_A}/made-for-alice"
    assert (await as_alice.put(path, json=application("made-for-alice", "a"))).status_code \
        in (200, 409)
    await caller("bob").delete(path)
    mine = [(e["user"], e.get("impersonated_by"), e["verb"]) for e in audited(path)]
    assert ("alice", "bob", "update") in mine and ("bob", None, "delete") in mine, mine
    refused = await as_alice.post(APPS_B, json=application("x", "b"))
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "user 'alice' may not create kubernetes/applications in namespace 'b'"
    )
    # acting for someone without rights is acting with none
    assert await status_of(caller("bob", "nobody"), APPS_B) == 403
    # anonymous is no one to act for
    assert await status_of(caller("bob", "system:anonymous"), APPS_B) == 401
    # no name: refused, not the caller's own rights
    refused = await caller("bob", "").get(APPS_B)
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "user 'bob' may not impersonate: Impersonate-User names no one"
    )
    # a right on users is no right on groups
    refused = await caller("bob", "alice", ("shoal:admins",)).get("/core/roles")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "user 'bob' may not impersonate group 'shoal:admins'"


async def test_a_controller_acts_for_a_requester_with_the_requesters_groups(
    client: ShoalClient, caller: Caller
) -> None:
    """The RescheduleTask controller acts for a task's requester, user and groups."""
    team = RoleRule(api="kubernetes", resources=["applications"], namespaces=["c"],
                    verbs=["get", "list"])  # fmt: skip
    await bind(client, "team-c", "group:team-c", team)
    controller = "reschedule-controller"
    # on its own, the controller reads applications everywhere
    assert await status_of(caller(controller), APPS_B) == 200
    as_carol = caller(controller, "carol", ("team-c",))

    async def acting() -> bool:
        return await status_of(as_carol, "/kubernetes/namespaces/c/applications") == 200

    await wait_for(acting, message="team-c's role applied")
    assert await status_of(as_carol, APPS_B) == 403
    assert await status_of(caller(controller, "carol"), "/kubernetes/namespaces/c/applications") \
        == 403  # without the group, carol has no right there
    # a component without the right may not act for anyone
    for component in ("scheduler", "kube-controller", "garbage-collector", "agent"):
        answer = await caller(component, "carol", ("team-c",)).get(APPS_B)
        assert answer.status_code == 403, component
        assert "may not impersonate" in answer.json()["detail"]


async def test_a_rule_naming_users_lets_act_as_those_users_only(
    client: ShoalClient, tenant: Tenant, caller: Caller
) -> None:
    await tenant("bob", "b")
    await bind(client, "alice-acts-as-bob", "alice", impersonate(names=("bob",)))
    as_bob = caller("alice", "bob")

    async def acting() -> bool:
        return await status_of(as_bob, APPS_B) == 200

    await wait_for(acting, message="alice acts as bob")
    assert await status_of(as_bob, APPS_A) == 403  # bob's rights: namespace b only
    for act_as in ("carol", "admin", "bobby", "system:kube-controller"):
        refused = await caller("alice", act_as).get(APPS_B)
        assert refused.status_code == 403, act_as
        assert refused.json()["detail"] == f"user 'alice' may not impersonate user {act_as!r}"
    # nor bob with a group: groups take their own right
    refused = await caller("alice", "bob", ("shoal:admins",)).get("/core/roles")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "user 'alice' may not impersonate group 'shoal:admins'"


async def test_a_rule_naming_groups_lets_act_with_those_groups_only(
    client: ShoalClient, caller: Caller
) -> None:
    team = RoleRule(api="kubernetes", resources=["applications"], namespaces=["c"],
                    verbs=["get", "list"])  # fmt: skip
    await bind(client, "team-c", "group:team-c", team)
    groups_c = impersonate(resource="groups", names=("team-c",))
    await bind(client, "alice-acts", "alice", impersonate(), groups_c)
    as_carol = caller("alice", "carol", ("team-c",))

    async def acting() -> bool:
        return await status_of(as_carol, "/kubernetes/namespaces/c/applications") == 200

    await wait_for(acting, message="alice acts with team-c")
    assert await status_of(as_carol, APPS_B) == 403  # team-c's rights: namespace c only
    for groups in (("shoal:admins",), ("team-c", "shoal:admins"), ("team-d",)):
        refused = await caller("alice", "carol", groups).get("/core/roles")
        assert refused.status_code == 403, groups
        named = next(g for g in groups if g != "team-c")
        assert refused.json()["detail"] == f"user 'alice' may not impersonate group {named!r}"


async def test_a_namespaced_rule_naming_a_user_opens_nothing(
    client: ShoalClient, tenant: Tenant, caller: Caller
) -> None:
    await tenant("bob", "b")
    reads_c = RoleRule(api="kubernetes", resources=["applications"], namespaces=["c"],
                       verbs=["list"])  # fmt: skip
    await bind(client, "alice-in-b", "alice", impersonate("b", names=("bob",)), reads_c)

    async def applied() -> bool:
        return await status_of(caller("alice"), "/kubernetes/namespaces/c/applications") == 200

    await wait_for(applied, message="alice's role applied")
    refused = await caller("alice", "bob").get(APPS_B)
    assert refused.status_code == 403
    assert refused.json()["detail"] == "user 'alice' may not impersonate user 'bob'"


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        (RoleRule(api="kubernetes", resources=["applications"], namespaces=["a"],
                  verbs=["get"], names=["web"]), "rules[0].names"),
        (RoleRule(api="core", resources=["users"], verbs=["impersonate", "get"],
                  names=["bob"]), "rules[0].names"),
        (RoleRule(api="*", resources=["users"], verbs=["impersonate"], names=["bob"]),
         "rules[0].names"),
        (RoleRule(api="core", resources=["users"], verbs=["impersonate"], names=[""]),
         "rules[0].names[0]"),
    ],
    ids=["on applications", "with another verb", "any group", "an empty name"],
)  # fmt: skip
async def test_only_impersonate_rules_name_users_or_groups(
    caller: Caller, rule: RoleRule, field: str
) -> None:
    """A name on any other rule would read as a limit that nothing applies."""
    answer = await caller("admin").post("/core/roles", json={
        "api": "core", "kind": "Role", "metadata": {"name": "named"},
        "rules": [rule.model_dump(mode="json")]})  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == [field], answer.text
