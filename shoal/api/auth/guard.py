"""The ASGI middleware in front of every route, the fast path included.

Per request: authenticate, apply the user's rate, authorise what the path
names, then, where needed, rewrite the answer: list-all and watch-all keep
only the namespaces the user may list or watch, and secret fields are
redacted for users without the ``secrets`` verb. Writes are audited. The one
call without a login is a workload's hook call, which its token authorises.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.responses import Response

from shoal.api import body as door
from shoal.api.auth import bodies, clusters
from shoal.api.auth.audit import Audit
from shoal.api.auth.authn import (
    ANONYMOUS_USER,
    Authenticator,
    Unauthenticated,
    User,
    authenticated,
)
from shoal.api.auth.context import VISIBLE_NAMESPACE, WRITER_SEES_SECRETS
from shoal.api.auth.limits import PerUser
from shoal.api.auth.query import checked_query, read_query
from shoal.api.auth.rbac import NOTHING, Authorizer, Grant
from shoal.api.auth.rewrite import Rewrite
from shoal.api.auth.roles import ADMINS, COMPONENTS, component_user
from shoal.api.auth.secrets import paths_of_resource
from shoal.api.auth.target import (
    ANY_USER,
    BATCHES,
    PUBLIC,
    PUBLIC_PREFIX,
    Batch,
    Target,
    target,
)
from shoal.machinery import confined
from shoal.machinery.asgi import ASGIApp, Message, Receive, Scope, Send
from shoal.machinery.problems import problem
from shoal.model import registry
from shoal.store.base import NotFound, Store

_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HOOK_CALL = re.compile(r"^/kubernetes/namespaces/[^/]+/applications/[^/]+/(complete|shutdown)$")
"""Krake's hook routes: a workload calls them with the token it was given, no login."""
JOIN = "/kubernetes/join"
"""A pull cluster's join: its bootstrap token, checked by the route, is its credential."""

_COMPONENTS = frozenset(component_user(c) for c in COMPONENTS)
"""Shoal's own components: not held to the per-user rate (they batch their writes)."""


@dataclass
class Guard:
    app: ASGIApp
    authn: Authenticator
    authz: Authorizer
    limits: PerUser
    audit: Audit | None
    store: Store | None = None  # reads the objects a cluster identity's field rules check

    @property
    def rbac(self) -> bool:
        return self.authz.mode == "RBAC"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sees = WRITER_SEES_SECRETS.set(False)  # until the user is known to have the right
        visible = VISIBLE_NAMESPACE.set(_NOTHING)  # until the user's grant is known
        caller = confined.CALLER.set(None)
        try:
            await self._serve(scope, receive, send)
        finally:
            confined.CALLER.reset(caller)
            VISIBLE_NAMESPACE.reset(visible)
            WRITER_SEES_SECRETS.reset(sees)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websocket route exists: none goes round the checks
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["path"] in PUBLIC or scope["path"].startswith(PUBLIC_PREFIX):
            await self.app(scope, receive, send)
            return
        method: str = scope["method"]
        if self.audit is not None and method in _WRITES:
            send = self._audited(scope, send)
        try:
            user = await self.authn.authenticate(scope)
        except Unauthenticated as error:
            joining = method == "POST" and scope["path"] == JOIN
            if joining and _no_credentials(scope):
                # a pull cluster joining: the bootstrap token in the body, checked by the
                # route, is its credential (docs/pull-mode.md); joins share one rate
                scope["shoal.user"] = ANONYMOUS_USER
                if not self.limits.take(ANONYMOUS_USER.name, time.monotonic()):
                    await _answer(scope, receive, send, 429, "joins: too many requests")
                    return
                await self.app(scope, receive, send)
                return
            if method == "PUT" and HOOK_CALL.match(scope["path"]) and _no_credentials(scope):
                # a workload calling its hook: the hook's token, checked by the route, is
                # its credential (docs/clouds.md, "Application hooks"). Such calls share
                # one user's rate: guesses cannot flood the API.
                scope["shoal.user"] = ANONYMOUS_USER
                if not self.limits.take(ANONYMOUS_USER.name, time.monotonic()):
                    await _answer(scope, receive, send, 429, "hook calls: too many requests")
                    return
                await self.app(scope, receive, send)
                return
            await _answer(scope, receive, send, 401, str(error))
            return
        if _header(scope, b"impersonate-user") is not None:
            impersonated = (
                f"user {user.name!r} may not impersonate"
                if clusters.identity(user)
                else self._impersonate(scope, user)
            )
            if isinstance(impersonated, str):
                scope["shoal.user"] = user
                await _answer(scope, receive, send, 403, impersonated)
                return
            scope["shoal.impersonator"] = user  # the audit names who acted for whom
            user = impersonated
        scope["shoal.user"] = user
        scope["shoal.rbac"] = self.rbac  # who writes which status field (context.writer)
        if self.rbac and user.anonymous:
            if method == "PUT" and HOOK_CALL.match(scope["path"]):
                # a workload calling its hook: the hook's token, checked by the route, is
                # its credential (docs/clouds.md, "Application hooks")
                await self.app(scope, receive, send)
                return
            await _answer(scope, receive, send, 401, "anonymous requests are not authorised")
            return
        if user.name not in _COMPONENTS:
            if not self.limits.take(user.name, time.monotonic()):
                await _answer(scope, receive, send, 429, f"user {user.name!r}: too many requests")
                return
            confined.CALLER.set(user.name)  # one template of each user parsed at a time
        if method in _WRITES:
            raw = await bodies.read_body(receive)
            if raw:
                try:
                    door.parsed(scope, raw)
                except door.MalformedBody as error:
                    # the same answer as the route's: the field and the reason
                    reason = f"malformed JSON: {error}"
                    errors = [{"field": "body", "reason": reason}]
                    await problem(400, f"body: {reason}", errors=errors)(scope, receive, send)
                    return
            receive = bodies.replay(raw, receive)
        path: str = scope["path"]
        own = clusters.identity(user)  # a pull cluster's agent: its own rules, nothing else
        if path in ANY_USER and own is None:
            await self.app(scope, receive, send)
            return
        batch = BATCHES.get(path)
        if batch is not None and method == "POST":
            if own is not None:
                what = Target(batch.api, batch.resource, batch.verb, None, None, False)
                await self._forbid(scope, receive, send, user, what)
                return
            await self._batch(scope, receive, send, user, batch)
            return
        query: bytes = scope.get("query_string", b"")
        params = read_query(query) if query else {}
        if isinstance(params, str):
            await _answer(scope, receive, send, 400, params)
            return
        what = target(method, path, params)
        scope["shoal.target"] = what
        if query or what.verb in ("list", "list_all"):
            checked = checked_query(params, what.verb, self.limits.limits)
            if isinstance(checked, str):  # a value out of bounds: 422 naming it, as the route
                await _answer(scope, receive, send, 422, checked)
                return
            scope["query_string"] = checked
        keep = None
        if own is not None:
            revoked = await clusters.refusal(self.store, user, own) if self.store else None
            if revoked is not None:  # checked on each request: a revocation holds at once
                await _answer(scope, receive, send, 401, revoked)
                return
            decision = clusters.decide(own, what)
            if decision.refusal is not None:
                await _answer(scope, receive, send, 403, decision.refusal)
                return
            keep = decision.keep
            if keep is not None and what.verb not in _READS and not await self._keeps(what, keep):
                await _answer(scope, receive, send, 403, f"{user.name}: not its own cluster's")
                return
            grant = Grant(False, frozenset({own.namespace}), False)
        elif what.api == "kubernetes" and what.plural == COPIES and self.rbac:
            refusal = _copies_refusal(user, what)
            if refusal is not None:
                await _answer(scope, receive, send, 403, refusal)
                return
            # a copy is a part of its application: whoever reads the applications reads it
            read = "applications" if what.verb in _READS else what.resource
            grant = self.authz.grant(user, what.api, read, what.verb)
        else:
            grant = self.authz.grant(user, what.api, what.resource, what.verb)
        if what.every:
            # A write across namespaces (a batch of events) needs the right in every one.
            if not (grant.everywhere if what.verb == "create" else grant.some_namespace):
                await self._forbid(scope, receive, send, user, what)
                return
        elif not grant.allows(what.namespace):
            await self._forbid(scope, receive, send, user, what)
            return
        visible = None if (not what.every or grant.everywhere) else grant
        VISIBLE_NAMESPACE.set(None if visible is None else visible.allows)
        secrets = paths_of_resource(what.api, what.plural)
        clear = None
        if secrets is not None:
            clear = NOTHING if own else self.authz.grant(user, what.api, what.plural, "secrets")
            if clear.everywhere if what.every else clear.allows(what.namespace):
                secrets = None
        WRITER_SEES_SECRETS.set(secrets is None)
        if visible is not None or secrets is not None or keep is not None:
            send = Rewrite(send, visible, secrets, clear, keep).send
        if what.resource == "rescheduletasks" and what.verb == "create":
            stamped = bodies.stamp_requester(scope.get(door.SCOPE_KEY), user)
            if stamped is not None:
                receive = bodies.replay(door.replace(scope, stamped), receive)
        if what.verb == "watch":
            if not self.limits.open_watch(user.name):
                limit = self.limits.limits.watches_per_user
                await _answer(scope, receive, send, 429, f"at most {limit} watches per user")
                return
            try:
                await self.app(scope, receive, send)
            finally:
                self.limits.close_watch(user.name)
            return
        await self.app(scope, receive, send)

    async def _keeps(self, what: Target, keep: Callable[[Any], bool]) -> bool:
        """Whether the stored object a write names passes ``keep`` (a cluster identity's
        field rule: the object must name its cluster)."""
        kind = registry.BY_PLURAL.get((what.api, what.plural))
        if kind is None or what.name is None or self.store is None:
            return False
        try:
            record = await self.store.get(kind.key(what.name, what.namespace))
        except NotFound:
            return False
        return keep(orjson.loads(record.value))

    async def _forbid(
        self, scope: Scope, receive: Receive, send: Send, user: User, what: Target
    ) -> None:
        where = f" in namespace {what.namespace!r}" if what.namespace else ""
        detail = f"user {user.name!r} may not {what.verb} {what.api}/{what.resource}{where}"
        await _answer(scope, receive, send, 403, detail)

    async def _batch(
        self, scope: Scope, receive: Receive, send: Send, user: User, batch: Batch
    ) -> None:
        """A batch of writes, each authorised in its namespace (403 results for the rest)."""
        field, api, resource, verb = batch.field, batch.api, batch.resource, batch.verb
        what = Target(api, resource, verb, None, None, False)
        refusal = _copies_refusal(user, what) if what.plural == COPIES and self.rbac else None
        if refusal is not None:  # a batch of Copies: as a single write of one
            await _answer(scope, receive, send, 403, refusal)
            return
        grant = self.authz.grant(user, api, resource, verb)
        scope["shoal.target"] = what
        data = scope.get(door.SCOPE_KEY)
        scope["shoal.items"] = bodies.item_names(data, field, batch.namespace)
        if grant.everywhere:
            await self.app(scope, receive, send)
            return

        def forbidden(namespace: str) -> str:
            return f"user {user.name!r} may not {verb} {api}/{resource} in {namespace!r}"

        split = bodies.split_batch(data, field, batch.namespace, grant, forbidden)
        if split is None:
            await self.app(scope, receive, send)
            return
        allowed, refused = split
        total = len(refused) + len(allowed[field])
        if len(refused) == total:
            response = Response(bodies.all_refused(refused), media_type="application/json")
            await response(scope, receive, send)
            return
        receive = bodies.replay(door.replace(scope, allowed), receive)
        await self.app(scope, receive, bodies.merged(refused, total, send))

    def _impersonate(self, scope: Scope, user: User) -> User | str:
        """The user named by ``Impersonate-User`` with the groups of ``Impersonate-Group``
        (comma-separated or repeated), or why the caller may not act as them.

        Controllers act for the people who asked (the RescheduleTask controller for
        the task's requester): they need ``impersonate`` on ``core/users``, and on
        ``core/groups`` for the groups; a rule's ``names`` limits whom.
        """
        name = _header(scope, b"impersonate-user") or ""
        if not name:
            return f"user {user.name!r} may not impersonate: Impersonate-User names no one"
        groups = [
            group.strip()
            for key, value in scope["headers"]
            if key == b"impersonate-group"
            for group in value.decode("latin-1").split(",")
            if group.strip()
        ]
        for resource, kind, names in (("users", "user", [name]), ("groups", "group", groups)):
            for each in names:
                if not self.authz.may_name(user, "core", resource, "impersonate", each):
                    return f"user {user.name!r} may not impersonate {kind} {each!r}"
        return authenticated(name, groups)

    def _audited(self, scope: Scope, send: Send) -> Send:
        audit = self.audit
        assert audit is not None

        async def send_and_audit(message: Message) -> None:
            if message["type"] == "http.response.start":
                audit.write(
                    scope.get("shoal.user"),
                    scope["method"],
                    scope["path"],
                    scope.get("shoal.target"),
                    message["status"],
                    scope.get("shoal.items"),
                    scope.get("shoal.impersonator"),
                )
            await send(message)

        return send_and_audit


_READS = frozenset({"get", "list", "list_all", "watch"})
COPIES = "copies"
_COPY_WRITER = component_user("kube-controller")


def _copies_refusal(user: User, what: Target) -> str | None:
    """Copies are written by the kube controller (and answered by their cluster's agent):
    a copy steers an agent that applies it with the member cluster's own credentials, so
    no user writes one, whatever their role says; administrators may (to repair)."""
    if what.verb in _READS or user.name == _COPY_WRITER or ADMINS in user.groups:
        return None
    return (f"{user.name} may not {what.verb} kubernetes/{what.resource}: copies are "
            "written by the kube controller and their cluster's agent")  # fmt: skip


def _NOTHING(namespace: str | None) -> bool:
    return False


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _no_credentials(scope: Scope) -> bool:
    """Whether the request presents no credential at all (a wrong one is never anonymous)."""
    return scope.get("shoal.peer") is None and not any(
        key in (b"authorization", b"x-auth-token") for key, _ in scope["headers"]
    )


async def _answer(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    response = problem(status, detail)
    if status == 401:
        response.headers["www-authenticate"] = 'Bearer realm="shoal"'
    await response(scope, receive, send)
