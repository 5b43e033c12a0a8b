"""Authorization: ``always-allow``, ``always-deny`` or RBAC with Krake's Role and RoleBinding.

A rule ``{api, resources, namespaces, verbs}`` grants; ``""`` in any of them is
the wildcard. Verbs are Krake's (``create, list, list_all, get, update,
delete``) plus ``watch`` and ``secrets`` (read secret fields in clear);
``list`` also grants ``watch``, as Krake's watches were lists. Subresources
are resources of their own (``applications/binding``). A cluster-wide
resource (Role, GlobalMetric, RescheduleTask…) is granted only by a rule
whose ``namespaces`` is empty or holds ``""``: a right in one namespace never
opens anything outside it (Krake granted every cluster-wide kind).
An ``impersonate`` rule on ``core/users`` or ``core/groups`` may give
``names``: whom it lets act as (``may_name``); such a rule grants nothing else.

Decisions come from an index in memory, fed by a watch on roles and
bindings: no store read per request, and each (user, resource, verb) answer
is computed once until a role or binding changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from shoal.api.auth.authn import User
from shoal.machinery.listwatch import ListWatch
from shoal.model.core import Role, RoleBinding
from shoal.store.base import Compacted, EventType, Store

log = logging.getLogger(__name__)

_IMPLIED = {"watch": ("watch", "list"), "list_all": ("list_all", "list")}


@dataclass(frozen=True, slots=True)
class Grant:
    """Where a user may do one verb on one resource."""

    everywhere: bool  # every namespace
    namespaces: frozenset[str]
    cluster: bool  # cluster-wide objects of the resource

    def allows(self, namespace: str | None) -> bool:
        if namespace is None:
            return self.cluster
        return self.everywhere or namespace in self.namespaces

    @property
    def some_namespace(self) -> bool:
        """Whether it opens a namespace: a list across namespaces has something to show.
        The cluster-wide objects of a resource are none (``namespaces: []`` opens only them)."""
        return self.everywhere or bool(self.namespaces)


NOTHING = Grant(False, frozenset(), False)
EVERYTHING = Grant(True, frozenset(), True)


@dataclass(frozen=True, slots=True)
class _Rule:
    api: str
    resources: frozenset[str]
    verbs: frozenset[str]
    namespaces: frozenset[str]
    names: frozenset[str] = frozenset()  # whom an impersonate rule acts as; empty: anyone

    @property
    def cluster_wide(self) -> bool:
        """Whether it opens the cluster-wide objects: ``namespaces`` empty, ``*`` or ``""``."""
        return not self.namespaces or not self.namespaces.isdisjoint(("", "*"))

    def covers(self, api: str, resource: str, verbs: tuple[str, ...]) -> bool:
        return (
            (self.api in ("", "*", api))  # "*" is any; "" too, in roles stored before "*"
            and (not self.resources.isdisjoint(("", "*", resource)))
            and (not self.verbs.isdisjoint(("", "*", *verbs)))
        )


class Authorizer:
    """The mode's answers: ``grant(user, api, resource, verb)``."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def grant(self, user: User, api: str, resource: str, verb: str) -> Grant:
        return EVERYTHING if self.mode == "always-allow" else NOTHING

    def may_name(self, user: User, api: str, resource: str, verb: str, name: str) -> bool:
        """Whether ``user`` may do ``verb`` on the cluster-wide object ``name`` of ``resource``
        (``impersonate`` on ``core/users`` or ``core/groups``: act as that user or group)."""
        return self.mode == "always-allow"

    async def start(self) -> None:
        """Ready to answer (RBAC: the index is loaded)."""

    async def stop(self) -> None:
        pass


class Rbac(Authorizer):
    def __init__(self, store: Store) -> None:
        super().__init__("RBAC")
        self.store = store
        self._roles: dict[str, tuple[_Rule, ...]] = {}
        self._bindings: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._by_subject: dict[str, tuple[str, ...]] = {}
        self._decisions: dict[tuple[tuple[str, ...], str, str, str], Grant] = {}
        self._task: asyncio.Task[None] | None = None
        self._loaded = asyncio.Event()

    # the index ----------------------------------------------------------------

    def set_role(self, name: str, data: dict[str, Any] | None) -> None:
        if data is None:
            self._roles.pop(name, None)
        else:
            self._roles[name] = tuple(
                _Rule(
                    str(r.get("api", "")),
                    frozenset(r.get("resources") or ()),
                    frozenset(r.get("verbs") or ()),
                    frozenset(r.get("namespaces") or ()),
                    frozenset(r.get("names") or ()),
                )
                for r in data.get("rules") or ()
            )
        self._decisions.clear()

    def set_binding(self, name: str, data: dict[str, Any] | None) -> None:
        if data is None:
            self._bindings.pop(name, None)
        else:
            self._bindings[name] = (tuple(data.get("users") or ()), tuple(data.get("roles") or ()))
        by_subject: dict[str, list[str]] = {}
        for users, roles in self._bindings.values():
            for user in users:
                by_subject.setdefault(user, []).extend(roles)
        self._by_subject = {s: tuple(dict.fromkeys(r)) for s, r in by_subject.items()}
        self._decisions.clear()

    def grant(self, user: User, api: str, resource: str, verb: str) -> Grant:
        key = (user.subjects, api, resource, verb)
        found = self._decisions.get(key)
        if found is None:
            found = self._compute(user, api, resource, _IMPLIED.get(verb, (verb,)))
            if len(self._decisions) > 100_000:
                self._decisions.clear()
            self._decisions[key] = found
        return found

    def may_name(self, user: User, api: str, resource: str, verb: str, name: str) -> bool:
        return any(
            rule.covers(api, resource, (verb,))
            and rule.cluster_wide
            and (not rule.names or name in rule.names)
            for rule in self._rules_of(user)
        )

    def _rules_of(self, user: User) -> Iterator[_Rule]:
        for subject in user.subjects:
            for role in self._by_subject.get(subject, ()):
                yield from self._roles.get(role, ())

    def _compute(self, user: User, api: str, resource: str, verbs: tuple[str, ...]) -> Grant:
        everywhere = cluster = False
        namespaces: set[str] = set()
        for rule in self._rules_of(user):
            if rule.names or not rule.covers(api, resource, verbs):
                continue  # a rule naming objects grants only them (``may_name``)
            if rule.cluster_wide:
                cluster = True
            if not rule.namespaces.isdisjoint(("", "*")):
                everywhere = True
            namespaces |= rule.namespaces
        return Grant(everywhere, frozenset(namespaces - {"", "*"}), cluster)

    # fed by a watch -------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._follow())
        loaded = asyncio.ensure_future(self._loaded.wait())
        await asyncio.wait((loaded, self._task), return_when=asyncio.FIRST_COMPLETED)
        if not self._loaded.is_set():
            loaded.cancel()
            self._task.result()  # the first list failed: say why

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _load(self) -> int:
        revisions = []
        for kind, apply in ((Role, self.set_role), (RoleBinding, self.set_binding)):
            records, revision = await self.store.list(kind.key_prefix())
            revisions.append(revision)
            seen = set()
            for record in records:
                name = record.key.rsplit("/", 1)[-1]
                seen.add(name)
                apply(name, orjson.loads(record.value))
            known = self._roles if kind is Role else self._bindings
            for gone in set(known) - seen:
                apply(gone, None)
        self._loaded.set()
        return min(revisions)  # the watch replays what changed between the two lists

    async def _follow(self) -> None:
        """List, then watch roles and bindings on the one list+watch loop: resume after a
        drop, list again if compacted, log any other failure and resume."""
        loop = ListWatch(self._load, self._watch, lambda error: isinstance(error, Compacted),
                         self._failed, retry=1.0, max_retry=1.0)  # fmt: skip
        loop.revision = await self._load()  # a first list that fails says why (``start``)
        await loop.run()

    async def _watch(self, revision: int) -> AsyncIterator[int]:
        role_prefix, binding_prefix = Role.key_prefix(), RoleBinding.key_prefix()
        # One stream for both kinds, not all of ``/core/``: every event, lease renewal
        # and metric write would wake the index (and be parsed) for nothing.
        both = os.path.commonprefix((role_prefix, binding_prefix))  # noqa: RUF071 (by character)
        async for event in self.store.watch(both, revision):
            name = event.key.rsplit("/", 1)[-1]
            data = None if event.type is EventType.DELETED else orjson.loads(event.value)
            if event.key.startswith(role_prefix):
                self.set_role(name, data)
            elif event.key.startswith(binding_prefix):
                self.set_binding(name, data)
            yield event.revision
        await asyncio.sleep(0.05)  # the store ended the stream: resume, never spin

    @staticmethod
    def _failed(error: Exception) -> bool:
        """Any failure but a compaction: logged, then the watch resumes where it was."""
        log.exception("RBAC index: watch failed; resuming")
        return False


def authorizer(mode: str, store: Store) -> Authorizer:
    return Rbac(store) if mode == "RBAC" else Authorizer(mode)
