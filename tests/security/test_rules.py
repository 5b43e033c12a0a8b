"""RBAC rules as Krake wrote them, and where Shoal is stricter."""

from __future__ import annotations

from shoal.api.auth.authn import authenticated
from shoal.api.auth.rbac import NOTHING, Rbac
from shoal.api.auth.target import target
from shoal.store.sqlite import SqliteStore


def _rbac(*rules: dict[str, object]) -> Rbac:
    rbac = Rbac(SqliteStore(":memory:"))
    rbac.set_role("r", {"rules": list(rules)})
    rbac.set_binding("b", {"users": ["alice", "group:ops"], "roles": ["r"]})
    return rbac


def test_krake_rules() -> None:
    rbac = _rbac(
        {
            "api": "kubernetes",
            "resources": ["applications"],
            "namespaces": ["a"],
            "verbs": ["list"],
        },
        {"api": "core", "resources": ["globalmetrics"], "namespaces": [], "verbs": ["get"]},
    )
    alice, bob = authenticated("alice"), authenticated("bob", ["ops"])
    for user in (alice, bob):  # a user, and a group as subject
        assert rbac.grant(user, "kubernetes", "applications", "list").allows("a")
        assert rbac.grant(user, "kubernetes", "applications", "watch").allows("a")  # list ⊃ watch
        assert not rbac.grant(user, "kubernetes", "applications", "list").allows("b")
        assert not rbac.grant(user, "kubernetes", "applications", "create").allows("a")
        assert not rbac.grant(user, "kubernetes", "applications/binding", "update").allows("a")
        assert rbac.grant(user, "core", "globalmetrics", "get").allows(None)
        # a rule naming namespaces grants nothing cluster-wide (Krake granted every global kind)
        assert not rbac.grant(user, "kubernetes", "applications", "list").allows(None)
    assert rbac.grant(authenticated("carol"), "core", "globalmetrics", "get") == NOTHING
    every = rbac.grant(alice, "kubernetes", "applications", "list_all")
    assert every.some_namespace and not every.everywhere and every.namespaces == {"a"}


def test_wildcards() -> None:
    rbac = _rbac({"api": "", "resources": [""], "namespaces": [""], "verbs": [""]})
    grant = rbac.grant(authenticated("alice"), "scheduling", "pods/binding", "update")
    assert grant.everywhere and grant.cluster


def test_targets_from_paths() -> None:
    t = target("GET", "/kubernetes/applications", {"watch": ""})
    assert (t.resource, t.verb, t.namespace, t.every) == ("applications", "watch", None, True)
    t = target("GET", "/kubernetes/applications", {"limit": "5"})
    assert (t.verb, t.every) == ("list_all", True)
    t = target("PUT", "/kubernetes/namespaces/a/applications/x/binding", {})
    assert (t.resource, t.verb, t.namespace, t.name) == ("applications/binding", "update", "a", "x")
    t = target("POST", "/scheduling/namespaces/b/dryrun", {})
    assert (t.api, t.resource, t.verb, t.namespace) == ("scheduling", "dryrun", "create", "b")
    t = target("GET", "/scheduling/namespaces/b/pods/p1", {})  # a kind added later: covered
    assert (t.resource, t.verb, t.namespace, t.name) == ("pods", "get", "b", "p1")
    t = target("GET", "/kubernetes/applications", {"watch": "false"})
    assert t.verb == "list_all"


def test_the_default_roles_pass_the_rule_checks() -> None:
    """``shoal check`` holds roles to the same rules: Shoal's own must pass them."""
    from shoal.api.auth.roles import defaults
    from shoal.model.core import Role
    from shoal.model.validation import check

    roles = [obj for obj in defaults() if isinstance(obj, Role)]
    assert len(roles) == 8
    for role in roles:
        assert [f for f in check(role) if not f.warning] == [], role.metadata.name
