"""Who is asking: every enabled method at once, the first that recognises the request wins.

Order: client certificate, static bearer token, OpenID Connect bearer token,
Keystone ``X-Auth-Token``, Krake's static user, anonymous. A credential that
is presented but recognised by no method is a 401, never anonymous.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.api.auth.config import Security

ANONYMOUS, AUTHENTICATED = "system:anonymous", "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"


@dataclass(frozen=True, slots=True)
class User:
    """Who sent a request. ``subjects``: the names a RoleBinding may list for this user,
    the name and ``group:<g>`` per group (computed once: the RBAC index looks them up)."""

    name: str
    groups: tuple[str, ...] = ()
    subjects: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "subjects", (self.name, *(f"group:{g}" for g in self.groups)))

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS


ANONYMOUS_USER = User(ANONYMOUS, (UNAUTHENTICATED,))


def authenticated(name: str, groups: list[str] | tuple[str, ...] = ()) -> User:
    return User(name, (*groups, AUTHENTICATED))


class Unauthenticated(Exception):
    """A credential was presented and no method accepted it."""


class StaticTokens:
    """Bearer tokens from a CSV file as Kubernetes writes it: ``token,user,uid,"g1,g2"``.

    The file is read again when its modification time changes (checked at most
    once a second), so tokens are added and revoked without a restart.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime = -1.0
        self._checked = 0.0
        self._users: dict[str, User] = {}
        self._reload(force=True)

    def _reload(self, now: float = 0.0, force: bool = False) -> None:
        if not force and now - self._checked < 1.0:
            return
        self._checked = now
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError:
            self._users = {}
            return
        if mtime == self._mtime and not force:
            return
        self._mtime = mtime
        self._users = parse_tokens(self.path.read_text())

    def lookup(self, token: str, now: float) -> User | None:
        self._reload(now)
        return self._users.get(token)


def parse_tokens(text: str) -> dict[str, User]:
    users: dict[str, User] = {}
    for row in csv.reader(io.StringIO(text)):
        if not row or row[0].startswith("#") or len(row) < 2:
            continue
        groups = [g for g in (row[3].split(",") if len(row) > 3 else []) if g]
        users[row[0].strip()] = authenticated(row[1].strip(), groups)
    return users


TokenCheck = Callable[[str], Awaitable[User | None]]


class Authenticator:
    """Every configured method; ``authenticate(scope)`` → the User, or Unauthenticated."""

    def __init__(
        self,
        security: Security,
        bearer: list[TokenCheck],
        keystone: TokenCheck | None,
        clock: Callable[[], float],
    ) -> None:
        self.static = StaticTokens(security.token_file) if security.token_file else None
        self.bearer = bearer
        self.keystone = keystone
        self.static_user = authenticated(security.static_user) if security.static_user else None
        self.allow_anonymous = security.allow_anonymous
        self.clock = clock

    async def authenticate(self, scope: MutableMapping[str, Any]) -> User:
        peer = scope.get("shoal.peer")
        if peer is not None:
            return authenticated(peer[0], peer[1])
        authorization = keystone_token = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"x-auth-token":
                keystone_token = value.decode("latin-1")
        if authorization is not None:
            scheme, _, token = authorization.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                raise Unauthenticated("Authorization: only Bearer tokens are accepted")
            if self.static is not None:
                user = self.static.lookup(token, self.clock())
                if user is not None:
                    return user
            for check in self.bearer:
                user = await check(token)
                if user is not None:
                    return user
            raise Unauthenticated("bearer token: not recognised")
        if keystone_token is not None:
            user = await self.keystone(keystone_token) if self.keystone else None
            if user is None:
                raise Unauthenticated("X-Auth-Token: not recognised")
            return user
        if self.static_user is not None:
            return self.static_user
        if self.allow_anonymous:
            return ANONYMOUS_USER
        raise Unauthenticated("no credentials: send a bearer token or a client certificate")


class TokenCache:
    """Results of remote checks (OIDC, Keystone), kept until the token expires.

    Rejections are kept for ``negative_ttl`` seconds, so a flood of bad tokens
    never turns into a flood of calls to the identity provider. Bounded: when
    full, the oldest half goes.
    """

    def __init__(self, clock: Callable[[], float], size: int = 50_000, negative_ttl: float = 10.0):
        self.clock = clock
        self.size = size
        self.negative_ttl = negative_ttl
        self._entries: dict[str, tuple[User | None, float]] = {}

    def get(self, token: str) -> tuple[bool, User | None]:
        """(found, user); a found None is a remembered rejection."""
        entry = self._entries.get(token)
        if entry is None:
            return False, None
        if entry[1] <= self.clock():
            del self._entries[token]
            return False, None
        return True, entry[0]

    def put(self, token: str, user: User | None, expires: float | None = None) -> None:
        if len(self._entries) >= self.size:
            for old in list(self._entries)[: self.size // 2]:
                del self._entries[old]
        until = expires if user is not None and expires else self.clock() + self.negative_ttl
        self._entries[token] = (user, until)

    def cached(
        self, check: Callable[[str], Awaitable[tuple[User | None, float | None]]]
    ) -> TokenCheck:
        """``check`` wrapped: called once per token and lifetime."""

        async def cached_check(token: str) -> User | None:
            found, user = self.get(token)
            if found:
                return user
            user, expires = await check(token)
            self.put(token, user, expires)
            return user

        return cached_check
