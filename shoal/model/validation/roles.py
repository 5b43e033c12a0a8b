"""Roles that grant something: known groups, resources and verbs, or the ``*`` wildcard.

An empty rule, or ``api: ""``, grants nothing a person meant (Krake read ``""``
as "any", which a missing value also looks like); ``*`` says "any" on purpose.
Roles stored with ``""`` keep working: the authoriser reads both. A role without
rules (``rules: []``) is accepted, as Krake accepts it, and grants nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from shoal.machinery.paths import join
from shoal.model.validation.findings import Finding, type_name
from shoal.model.validation.names import identifier

ANY = "*"
VERBS = ("create", "list", "list_all", "get", "update", "delete", "watch", "secrets", "impersonate")
"""Krake's verbs, and Shoal's ``watch``, ``secrets`` and ``impersonate``."""
IMPERSONATED = frozenset({"users", "groups"})
"""The ``core`` resources an ``impersonate`` rule names: who a request may act as."""


@cache
def resources_by_group() -> dict[str, frozenset[str]]:
    """Every resource a rule can name, per API group: plurals and ``plural/subresource``."""
    from shoal.model.registry import KINDS

    groups: dict[str, set[str]] = {"core": {"users", "groups"}}  # for impersonate
    for kind in KINDS:
        names = groups.setdefault(kind.api_name(), set())
        names.add(kind.plural)
        names.update(f"{kind.plural}/{sub}" for sub in kind.subresources)
    groups["kubernetes"].add("applications/reschedule")
    return {group: frozenset(names) for group, names in groups.items()}


def check_rules(rules: list[Any], path: str) -> Iterator[Finding]:
    known = resources_by_group()
    for index, rule in enumerate(rules):
        yield from _rule(rule, join(path, index), known)


def _rule(rule: Any, path: str, known: dict[str, frozenset[str]]) -> Iterator[Finding]:
    api, resources, verbs = rule.api, rule.resources, rule.verbs
    if api != ANY and api not in known:
        groups = ", ".join(sorted(known))
        yield Finding(join(path, "api"), f"{api!r} is not an API group ({groups}, or '*' for any)")
        allowed: frozenset[str] = frozenset()
    else:
        allowed = frozenset().union(*known.values()) if api == ANY else known[api]
    if not resources:
        yield Finding(join(path, "resources"), "must name at least one resource ('*' for any)")
    for index, resource in enumerate(resources):
        if resource != ANY and allowed and resource not in allowed:
            where = "any group" if api == ANY else f"group {api!r}"
            yield Finding(
                join(path, "resources", index),
                f"{resource!r} is not a resource of {where} ({', '.join(sorted(allowed))})",
            )
    if not verbs:
        yield Finding(join(path, "verbs"), "must name at least one verb ('*' for any)")
    for index, verb in enumerate(verbs):
        if verb != ANY and verb not in VERBS:
            yield Finding(
                join(path, "verbs", index),
                f"{verb!r} is not a verb ({', '.join(VERBS)}, or '*' for any)",
            )
    for index, namespace in enumerate(rule.namespaces):
        if namespace not in ("", ANY):
            yield from identifier(namespace, join(path, "namespaces", index), "a namespace")
    yield from _names(rule, path)


def _names(rule: Any, path: str) -> Iterator[Finding]:
    """``names`` limits whom an ``impersonate`` rule acts as, and nothing else: on any other
    rule it would be read as a limit the authoriser does not apply, and grant more than meant."""
    if not rule.names:
        return
    if rule.api != "core" or not set(rule.resources) <= IMPERSONATED or set(rule.verbs) != {
        "impersonate"
    }:
        yield Finding(
            join(path, "names"),
            "only a rule of verb 'impersonate' on core 'users' or 'groups' can name objects",
        )
    for index, name in enumerate(rule.names):
        yield from identifier(name, join(path, "names", index), "a user or group name")


def check_binding(users: list[Any], roles: list[Any]) -> Iterator[Finding]:
    for field, values in (("users", users), ("roles", roles)):
        if not isinstance(values, list):
            yield Finding(field, f"must be a list, not {type_name(values)}")
            continue
        for index, value in enumerate(values):
            yield from identifier(value, join(field, index))
