"""How a rule matches a request, one row per decision: group, resource, verb, namespace.

Each row is a role of one rule, bound to ``alice``, and what she may then do: which
namespaces a grant opens (``allows``), and whether it opens the cluster-wide objects of
the resource (``allows(None)``). A rule's ``namespaces: []`` opens the cluster-wide
objects only, never a namespace (docs/security.md, "Authorization"), as in Krake.
"""

from __future__ import annotations

from typing import Any

import pytest

from shoal.api.auth.authn import authenticated
from shoal.api.auth.rbac import EVERYTHING, NOTHING, Authorizer, Grant, Rbac, authorizer
from shoal.api.auth.roles import component_user, defaults
from shoal.api.auth.target import target
from shoal.model.core import Role, RoleBinding
from shoal.store.sqlite import SqliteStore

ALICE = authenticated("alice")


def rule(
    api: str = "*",
    resources: tuple[str, ...] = ("*",),
    namespaces: tuple[str, ...] = ("*",),
    verbs: tuple[str, ...] = ("*",),
) -> dict[str, Any]:
    return {"api": api, "resources": list(resources), "namespaces": list(namespaces),
            "verbs": list(verbs)}  # fmt: skip


def rbac_of(*rules: dict[str, Any], users: tuple[str, ...] = ("alice",)) -> Rbac:
    rbac = Rbac(SqliteStore(":memory:"))
    rbac.set_role("r", {"rules": list(rules)})
    rbac.set_binding("b", {"users": list(users), "roles": ["r"]})
    return rbac


def opened(grant: Grant) -> tuple[bool, frozenset[str], bool]:
    """What a grant opens: every namespace, the namespaces it names, the cluster-wide."""
    return grant.everywhere, grant.namespaces, grant.cluster


A = frozenset({"a"})
NONE: frozenset[str] = frozenset()

# (rule, the request's api, resource, verb) -> (everywhere, namespaces, cluster-wide)
NAMESPACES = [
    pytest.param(rule(namespaces=()), (False, NONE, True), id="[]: cluster-wide, no namespace"),
    pytest.param(rule(namespaces=("a",)), (False, A, False), id="[a]: a only"),
    pytest.param(rule(namespaces=("a", "b")), (False, {"a", "b"}, False), id="[a, b]"),
    pytest.param(rule(namespaces=("*",)), (True, NONE, True), id="[*]: every one"),
    pytest.param(rule(namespaces=("",)), (True, NONE, True), id="['']: every one (Krake)"),
    pytest.param(rule(namespaces=("a", "*")), (True, A, True), id="[a, *]"),
]


@pytest.mark.parametrize(("one", "want"), NAMESPACES)
def test_the_namespaces_a_rule_opens(one: dict[str, Any], want: tuple[Any, ...]) -> None:
    grant = rbac_of(one).grant(ALICE, "kubernetes", "applications", "get")
    assert opened(grant) == (want[0], frozenset(want[1]), want[2])


def test_an_empty_namespace_list_opens_no_namespace() -> None:
    grant = rbac_of(rule(namespaces=())).grant(ALICE, "kubernetes", "applications", "get")
    assert [grant.allows(n) for n in ("a", "default", "")] == [False, False, False]
    assert grant.allows(None) and not grant.some_namespace
    one = rbac_of(rule(namespaces=("a",))).grant(ALICE, "kubernetes", "applications", "get")
    assert (one.allows("a"), one.allows("b"), one.allows(None)) == (True, False, False)


MATCHES = [
    # the API group
    (rule(api="scheduling"), ("scheduling", "pods", "update"), True),
    (rule(api="scheduling"), ("core", "roles", "update"), False),
    (rule(api="scheduling"), ("kubernetes", "applications", "get"), False),
    (rule(api="kubernetes"), ("kubernetes", "applications", "get"), True),
    (rule(api="*"), ("core", "roles", "update"), True),
    (rule(api=""), ("core", "roles", "update"), True),  # stored before "*": still any
    ({"resources": ["*"], "namespaces": ["*"], "verbs": ["*"]}, ("core", "roles", "update"),
     True),  # no api at all: "" (the model's default), so any
    # the resource: subresources are resources of their own
    (rule(resources=("applications",)), ("kubernetes", "applications", "get"), True),
    (rule(resources=("applications",)), ("kubernetes", "applications/status", "update"), False),
    (rule(resources=("applications",)), ("kubernetes", "clusters", "get"), False),
    (rule(resources=("applications/binding",)), ("kubernetes", "applications", "get"), False),
    (rule(resources=("applications/binding",)), ("kubernetes", "applications/binding",
                                                 "update"), True),
    (rule(resources=("*",)), ("kubernetes", "applications/status", "update"), True),
    (rule(resources=("",)), ("kubernetes", "applications/status", "update"), True),
    (rule(resources=("clusters", "applications")), ("kubernetes", "applications", "get"), True),
    # the verb: list opens watch and list_all, nothing else opens another
    (rule(verbs=("get",)), ("kubernetes", "applications", "get"), True),
    (rule(verbs=("get",)), ("kubernetes", "applications", "list"), False),
    (rule(verbs=("get",)), ("kubernetes", "applications", "update"), False),
    (rule(verbs=("list",)), ("kubernetes", "applications", "watch"), True),
    (rule(verbs=("list",)), ("kubernetes", "applications", "list_all"), True),
    (rule(verbs=("watch",)), ("kubernetes", "applications", "list"), False),
    (rule(verbs=("list_all",)), ("kubernetes", "applications", "list"), False),
    (rule(verbs=("update",)), ("kubernetes", "applications", "create"), False),
    (rule(verbs=("create", "delete")), ("kubernetes", "applications", "delete"), True),
    (rule(verbs=("get",)), ("kubernetes", "clusters", "secrets"), False),
    (rule(verbs=("*",)), ("kubernetes", "clusters", "secrets"), True),
    (rule(verbs=("",)), ("core", "users", "impersonate"), True),
    (rule(api="core", resources=("users",), verbs=("impersonate",)),
     ("core", "users", "impersonate"), True),
    (rule(api="core", resources=("users",), verbs=("impersonate",)),
     ("core", "roles", "impersonate"), False),
    (rule(api="core", resources=("users",), verbs=("get",)),
     ("core", "users", "impersonate"), False),
]


@pytest.mark.parametrize(("one", "request_", "granted"), MATCHES)
def test_a_rule_matches_its_group_resource_and_verb(
    one: dict[str, Any], request_: tuple[str, str, str], granted: bool
) -> None:
    grant = rbac_of(one).grant(ALICE, *request_)
    assert opened(grant) == ((True, NONE, True) if granted else (False, NONE, False))
    assert grant.some_namespace is granted


def test_rules_add_up_and_never_take_away() -> None:
    rbac = rbac_of(
        rule(api="kubernetes", resources=("applications",), namespaces=("a",), verbs=("get",)),
        rule(api="kubernetes", resources=("applications",), namespaces=("b",), verbs=("get",)),
        rule(api="kubernetes", resources=("clusters",), namespaces=("c",), verbs=("get",)),
        rule(api="core", resources=("applications",), namespaces=("d",), verbs=("get",)),
    )
    grant = rbac.grant(ALICE, "kubernetes", "applications", "get")
    assert opened(grant) == (False, frozenset({"a", "b"}), False)
    # a second role of hers adds the cluster-wide objects
    rbac.set_role("more", {"rules": [rule(api="kubernetes", resources=("applications",),
                                          namespaces=(), verbs=("get",))]})  # fmt: skip
    rbac.set_binding("b2", {"users": ["alice"], "roles": ["more"]})
    grant = rbac.grant(ALICE, "kubernetes", "applications", "get")
    assert opened(grant) == (False, frozenset({"a", "b"}), True)


def test_who_a_binding_names() -> None:
    rbac = rbac_of(rule(namespaces=("a",)), users=("alice", "group:ops"))
    by_group = authenticated("bob", ["ops"])
    for user, want in (
        (ALICE, A),
        (by_group, A),  # a group is a subject as group:<name>
        (authenticated("ops"), NONE),  # a user named like the group is not the group
        (authenticated("bob", ["dev"]), NONE),
        (authenticated("carol"), NONE),
    ):
        assert rbac.grant(user, "kubernetes", "applications", "get").namespaces == want, user


def test_a_binding_to_a_missing_role_grants_nothing_until_it_exists() -> None:
    rbac = Rbac(SqliteStore(":memory:"))
    rbac.set_binding("b", {"users": ["alice"], "roles": ["later"]})
    assert rbac.grant(ALICE, "kubernetes", "applications", "get") == NOTHING
    rbac.set_role("later", {"rules": [rule(namespaces=("a",))]})
    assert rbac.grant(ALICE, "kubernetes", "applications", "get").namespaces == A


def test_a_decision_changes_with_its_role_and_binding() -> None:
    """Answers are remembered per user and request, until any role or binding changes."""
    rbac = rbac_of(rule(namespaces=("a",)))
    assert rbac.grant(ALICE, "kubernetes", "applications", "get").namespaces == A
    rbac.set_role("r", {"rules": [rule(namespaces=("b",))]})
    assert rbac.grant(ALICE, "kubernetes", "applications", "get").namespaces == {"b"}
    rbac.set_role("r", None)  # deleted
    assert rbac.grant(ALICE, "kubernetes", "applications", "get") == NOTHING
    rbac.set_role("r", {"rules": [rule(namespaces=("c",))]})
    assert rbac.grant(ALICE, "kubernetes", "applications", "get").namespaces == {"c"}
    rbac.set_binding("b", {"users": ["bob"], "roles": ["r"]})  # no longer hers
    assert rbac.grant(ALICE, "kubernetes", "applications", "get") == NOTHING
    assert rbac.grant(authenticated("bob"), "kubernetes", "applications", "get").namespaces == {
        "c"
    }
    rbac.set_binding("b", None)
    assert rbac.grant(authenticated("bob"), "kubernetes", "applications", "get") == NOTHING


def test_one_subjects_bindings_add_up() -> None:
    rbac = Rbac(SqliteStore(":memory:"))
    rbac.set_role("ra", {"rules": [rule(namespaces=("a",))]})
    rbac.set_role("rb", {"rules": [rule(namespaces=("b",))]})
    rbac.set_binding("one", {"users": ["alice"], "roles": ["ra"]})
    rbac.set_binding("two", {"users": ["carol", "alice"], "roles": ["rb", "ra"]})
    assert rbac.grant(ALICE, "kubernetes", "applications", "get").namespaces == {"a", "b"}
    rbac.set_binding("one", None)
    assert rbac.grant(ALICE, "kubernetes", "applications", "get").namespaces == {"a", "b"}
    rbac.set_binding("two", None)
    assert rbac.grant(ALICE, "kubernetes", "applications", "get") == NOTHING


def test_a_grant_allows() -> None:
    assert [NOTHING.allows(n) for n in (None, "a")] == [False, False] and not NOTHING.some_namespace
    assert [EVERYTHING.allows(n) for n in (None, "a")] == [True, True] and EVERYTHING.some_namespace
    cluster_only = Grant(False, NONE, True)
    assert (cluster_only.allows(None), cluster_only.allows("a"), cluster_only.some_namespace) == (
        True, False, False,
    )  # fmt: skip
    named = Grant(False, A, False)
    assert (named.allows(None), named.allows("a"), named.allows("b"), named.some_namespace) == (
        False, True, False, True,
    )  # fmt: skip
    everywhere = Grant(True, NONE, False)
    assert (everywhere.allows("z"), everywhere.allows(None), everywhere.some_namespace) == (
        True, False, True,
    )  # fmt: skip


def test_the_modes_without_rbac() -> None:
    store = SqliteStore(":memory:")
    allow, deny, rbac = (authorizer(m, store) for m in ("always-allow", "always-deny", "RBAC"))
    assert type(allow) is Authorizer and type(deny) is Authorizer and isinstance(rbac, Rbac)
    assert rbac.store is store and rbac.mode == "RBAC" and allow.mode == "always-allow"
    assert allow.grant(ALICE, "core", "roles", "delete") == EVERYTHING
    assert deny.grant(ALICE, "core", "roles", "get") == NOTHING
    assert rbac.grant(ALICE, "core", "roles", "get") == NOTHING  # no role yet


def shipped_rbac() -> Rbac:
    """The index over the default roles and bindings ``shoal up``'s API creates."""
    rbac = Rbac(SqliteStore(":memory:"))
    for obj in defaults():
        data = obj.model_dump(mode="json")
        if isinstance(obj, Role):
            rbac.set_role(obj.metadata.name, data)
        else:
            assert isinstance(obj, RoleBinding)
            rbac.set_binding(obj.metadata.name, data)
    return rbac


# (component, api, resource, verb) -> granted in every namespace
SHIPPED = [
    ("agent", "scheduling", "pods", "update", True),
    ("agent", "scheduling", "pods/binding", "update", True),
    ("agent", "core", "roles", "update", False),  # its scheduling/* rule is scheduling's only
    ("agent", "core", "rolebindings", "create", False),
    ("agent", "kubernetes", "clusters", "secrets", True),
    ("agent", "kubernetes", "clusters", "update", False),
    ("agent", "kubernetes", "applications", "get", False),
    ("garbage-collector", "kubernetes", "clusters", "delete", True),
    ("garbage-collector", "kubernetes", "clusters", "secrets", False),
    ("garbage-collector", "core", "users", "impersonate", False),
    ("reschedule-controller", "core", "users", "impersonate", True),
    ("reschedule-controller", "kubernetes", "applications", "update", False),
    ("reschedule-controller", "kubernetes", "applications/reschedule", "update", True),
    ("scheduler", "core", "users", "impersonate", False),
    ("scheduler", "kubernetes", "applications/binding", "update", True),
    ("scheduler", "kubernetes", "applications", "update", False),
    ("kube-controller", "kubernetes", "clusters", "secrets", True),
    ("kube-controller", "kubernetes", "applications/binding", "update", False),
    ("cluster-observer", "kubernetes", "applications", "get", False),
    ("infrastructure-controller", "kubernetes", "clusters", "update", True),
    ("infrastructure-controller", "kubernetes", "clusters", "delete", False),
]


@pytest.mark.parametrize(("component", "api", "resource", "verb", "granted"), SHIPPED)
def test_the_shipped_roles(component: str, api: str, resource: str, verb: str,
                           granted: bool) -> None:  # fmt: skip
    grant = shipped_rbac().grant(authenticated(component_user(component)), api, resource, verb)
    assert (grant.everywhere, grant.cluster) == (granted, granted)


def test_the_administrators_group_may_do_everything() -> None:
    rbac = shipped_rbac()
    admin = authenticated("root", ["shoal:admins"])
    for request in (("core", "roles", "delete"), ("core", "users", "impersonate"),
                    ("kubernetes", "clusters", "secrets")):  # fmt: skip
        assert opened(rbac.grant(admin, *request)) == (True, NONE, True)
    # a user named after the group is not in it
    assert rbac.grant(authenticated("shoal:admins"), "core", "roles", "get") == NOTHING


# (method, path, query) -> (api, resource, verb, namespace, name, every)
TARGETS = [
    ("GET", "/kubernetes/namespaces/a/applications", {},
     ("kubernetes", "applications", "list", "a", None, False)),
    ("GET", "/kubernetes/namespaces/a/applications", {"watch": "1"},
     ("kubernetes", "applications", "watch", "a", None, False)),
    ("GET", "/kubernetes/namespaces/a/applications", {"watch": ""},
     ("kubernetes", "applications", "watch", "a", None, False)),
    ("GET", "/kubernetes/namespaces/a/applications", {"watch": "FALSE"},
     ("kubernetes", "applications", "list", "a", None, False)),
    ("GET", "/kubernetes/namespaces/a/applications", {"watch": "No"},
     ("kubernetes", "applications", "list", "a", None, False)),
    ("GET", "/kubernetes/namespaces/a/applications", {"watch": "0"},
     ("kubernetes", "applications", "list", "a", None, False)),
    ("GET", "/kubernetes/namespaces/a/applications", {"limit": "5"},
     ("kubernetes", "applications", "list", "a", None, False)),
    ("GET", "/kubernetes/applications", {},
     ("kubernetes", "applications", "list_all", None, None, True)),
    ("GET", "/kubernetes/applications", {"watch": "true"},
     ("kubernetes", "applications", "watch", None, None, True)),
    ("GET", "/core/roles", {}, ("core", "roles", "list", None, None, False)),  # cluster-wide
    ("GET", "/core/roles", {"watch": "1"}, ("core", "roles", "watch", None, None, False)),
    ("GET", "/core/roles/r1", {}, ("core", "roles", "get", None, "r1", False)),
    ("GET", "/core/roles/ROLEX", {}, ("core", "roles", "get", None, "ROLEX", False)),
    ("HEAD", "/kubernetes/namespaces/a/applications/x", {},
     ("kubernetes", "applications", "get", "a", "x", False)),
    ("GET", "/kubernetes/namespaces/a/applications/x", {"watch": "1"},
     ("kubernetes", "applications", "get", "a", "x", False)),
    ("POST", "/kubernetes/namespaces/a/applications", {},
     ("kubernetes", "applications", "create", "a", None, False)),
    ("POST", "/kubernetes/applications", {},
     ("kubernetes", "applications", "create", None, None, True)),
    ("PUT", "/kubernetes/namespaces/a/applications/x", {},
     ("kubernetes", "applications", "update", "a", "x", False)),
    ("PATCH", "/kubernetes/namespaces/a/applications/x/status", {},
     ("kubernetes", "applications/status", "update", "a", "x", False)),
    ("DELETE", "/kubernetes/namespaces/a/applications/x", {},
     ("kubernetes", "applications", "delete", "a", "x", False)),
    ("PUT", "/kubernetes/namespaces/a/applications/x/a/b", {},
     ("kubernetes", "applications/a/b", "update", "a", "x", False)),
    ("DELETE", "/core/globalmetrics/m/", {}, ("core", "globalmetrics", "delete", None, "m", False)),
    ("OPTIONS", "/core/roles", {}, ("core", "roles", "options", None, None, False)),
    ("GET", "/kubernetes/namespaces/a", {}, ("kubernetes", "namespaces", "get", None, "a", False)),
    ("GET", "/no/such", {}, ("no", "such", "list", None, None, False)),
    ("GET", "/kubernetes", {}, ("kubernetes", "", "list", None, None, False)),
    ("GET", "/scheduling/namespaces/b/pods", {},
     ("scheduling", "pods", "list", "b", None, False)),
    ("GET", "/scheduling/pods", {}, ("scheduling", "pods", "list_all", None, None, True)),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "query", "want"), TARGETS)
def test_what_a_request_acts_on(method: str, path: str, query: dict[str, str],
                                want: tuple[Any, ...]) -> None:  # fmt: skip
    t = target(method, path, query)
    assert (t.api, t.resource, t.verb, t.namespace, t.name, t.every) == want
    assert t.plural == want[1].partition("/")[0]


def impersonating(resources: tuple[str, ...] = ("users",), names: tuple[str, ...] = (),
                  namespaces: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    return {**rule(api="core", resources=resources, namespaces=namespaces,
                   verbs=("impersonate",)), "names": list(names)}  # fmt: skip


# (rule, resource, name) -> whether alice may act as that user (users) or group (groups)
NAMED = [
    pytest.param(impersonating(), "users", "bob", True, id="users: anyone"),
    pytest.param(impersonating(names=("bob",)), "users", "bob", True, id="[bob]: bob"),
    pytest.param(impersonating(names=("bob",)), "users", "carol", False, id="[bob]: not carol"),
    pytest.param(impersonating(names=("bob",)), "users", "bo", False, id="[bob]: not a prefix"),
    pytest.param(impersonating(names=("bob", "carol")), "users", "carol", True, id="[bob, carol]"),
    pytest.param(impersonating(names=("bob",)), "groups", "bob", False, id="users: no group"),
    pytest.param(impersonating(("groups",), ("ops",)), "groups", "ops", True, id="groups [ops]"),
    pytest.param(impersonating(("groups",), ("ops",)), "groups", "dev", False, id="not dev"),
    pytest.param(impersonating(("groups",)), "users", "bob", False, id="groups: no user"),
    pytest.param(impersonating(namespaces=("*",)), "users", "bob", True, id="[*]: anyone"),
    pytest.param(impersonating(namespaces=("",)), "users", "bob", True, id="['']: anyone"),
    pytest.param(impersonating(namespaces=("a",)), "users", "bob", False, id="in a: no one"),
    pytest.param(impersonating(names=("bob",), namespaces=("a",)), "users", "bob", False,
                 id="[bob] in a: not bob"),
    pytest.param({**rule(api="core", resources=("users",), verbs=("get",)), "names": ["bob"]},
                 "users", "bob", False, id="another verb"),
    pytest.param(rule(), "users", "bob", True, id="everything"),
]  # fmt: skip


@pytest.mark.parametrize(("one", "resource", "name", "allowed"), NAMED)
def test_an_impersonate_rule_names_whom_it_acts_as(
    one: dict[str, Any], resource: str, name: str, allowed: bool
) -> None:
    rbac = rbac_of(one)
    assert rbac.may_name(ALICE, "core", resource, "impersonate", name) is allowed
    assert rbac.may_name(authenticated("bob"), "core", resource, "impersonate", name) is False


def test_a_rule_naming_objects_grants_nothing_else() -> None:
    """``grant`` answers for every object of a resource: a rule naming some adds nothing."""
    rbac = rbac_of(impersonating(names=("bob",)))
    assert opened(rbac.grant(ALICE, "core", "users", "impersonate")) == (False, NONE, False)
    assert opened(rbac_of(impersonating()).grant(ALICE, "core", "users", "impersonate")) == (
        False, NONE, True)  # fmt: skip


@pytest.mark.parametrize(("mode", "allowed"), [("always-allow", True), ("always-deny", False)])
def test_the_plain_modes_name_everyone_or_no_one(mode: str, allowed: bool) -> None:
    assert Authorizer(mode).may_name(ALICE, "core", "users", "impersonate", "bob") is allowed
