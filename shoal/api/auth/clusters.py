"""Pull clusters' own identity: ``system:cluster:<namespace>/<name>``, its credential and rights.

A pull cluster's agent (``shoal join``) holds a credential of its cluster alone: a JWT
(HS256) signed with a key derived from the API's secrets key ring, so that every API
server of an installation accepts it, rotating that ring rotates these keys too, and
no key of its own has to be configured. It names the cluster (namespace, name, uid)
and expires (``Security.cluster_credential_ttl``); the agent renews it before then.

What the identity may do is not RBAC's to grant: its rights are ``OWN_RULES``, each
matched against the object's field that names the cluster, and nothing else (no
binding, not even one to ``system:authenticated``, reaches it).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jwt
import orjson

from shoal.api.auth.authn import AUTHENTICATED, User
from shoal.api.auth.target import Target
from shoal.model import registry
from shoal.store.base import AlreadyExists, Conflict, NotFound, Store

PREFIX = "system:cluster:"
GROUP = "system:clusters"
"""Every cluster identity's group."""
ISSUER = "shoal"
AUDIENCE = "shoal:cluster"
_ALGORITHM = "HS256"
_PURPOSE = b"shoal pull-cluster credentials"


def user_name(namespace: str, name: str) -> str:
    """The identity of cluster ``namespace/name``, namespace first: a name may hold ``:``,
    neither holds ``/``, so the identity names one cluster of one namespace."""
    return f"{PREFIX}{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class ClusterUser(User):
    """A cluster identity, with what its credential was issued for: the Cluster's uid and
    the credential generation then (``revoke`` moves it on, refusing every older one)."""

    uid: str = ""
    generation: int = 0


@dataclass(frozen=True, slots=True)
class ClusterId:
    """The cluster a credential speaks for."""

    namespace: str
    name: str


def identity(user: User | None) -> ClusterId | None:
    """The cluster ``user`` is, or None when it is no cluster identity."""
    if user is None or not user.name.startswith(PREFIX):
        return None
    namespace, sep, name = user.name[len(PREFIX) :].partition("/")
    if not sep or not namespace or not name:
        return None
    return ClusterId(namespace, name)


# rights ------------------------------------------------------------------------------------

NAME = ("metadata", "name")
"""The field of a Cluster that names it: its own name."""
COPY_CLUSTER = ("spec", "cluster", "name")
"""The field of a Copy that names the cluster it runs on."""


@dataclass(frozen=True, slots=True)
class OwnRule:
    """A right of a cluster identity: ``verbs`` on ``api``/``resource`` in its namespace,
    on the objects whose field at ``cluster`` names its own cluster."""

    api: str
    resource: str
    verbs: frozenset[str]
    cluster: tuple[str, ...]

    def covers(self, what: Target) -> bool:
        return self.api == what.api and self.resource == what.resource and what.verb in self.verbs


OWN_RULES: tuple[OwnRule, ...] = (
    OwnRule("kubernetes", "clusters", frozenset({"get"}), NAME),
    OwnRule("kubernetes", "clusters/status", frozenset({"update"}), NAME),
    OwnRule("kubernetes", "clusters/credential", frozenset({"create"}), NAME),
    OwnRule("kubernetes", "copies", frozenset({"get", "list", "watch"}), COPY_CLUSTER),
    OwnRule("kubernetes", "copies/status", frozenset({"update"}), COPY_CLUSTER),
    OwnRule("kubernetes", "copies/finalizers", frozenset({"update"}), COPY_CLUSTER),
)
"""Everything a cluster identity may do: read its Cluster, write its status (the lease is
its ``heartbeat``), renew its credential; read the Copies placed on it, write their status
and drop their finalizer once their objects are gone. A rule on another field than the
name filters lists and watches: they show only that cluster's objects."""


def field_at(data: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


@dataclass(frozen=True, slots=True)
class Decision:
    """What the guard does with a cluster identity's request: refused (``refusal``), or
    let through with ``keep`` filtering the objects it reads or writes (None: the path
    alone settled it)."""

    refusal: str | None
    keep: Callable[[Any], bool] | None = None


def decide(own: ClusterId, what: Target) -> Decision:
    """Whether cluster ``own`` may do ``what``; from the path, and for rules on another
    field than the name, with a filter of the objects involved."""
    rule = next((r for r in OWN_RULES if r.covers(what)), None)
    who = user_name(own.namespace, own.name)
    if rule is None:
        return Decision(f"{who} may not {what.verb} {what.api}/{what.resource}")
    if what.namespace != own.namespace:
        return Decision(f"{who} acts only in its own namespace {own.namespace!r}")
    if rule.cluster == NAME:
        if what.name != own.name:
            return Decision(f"{who} may {what.verb} {what.resource} of its own cluster only")
        return Decision(None)

    def keep(obj: Any) -> bool:
        return bool(field_at(obj, rule.cluster) == own.name)

    return Decision(None, keep)


# credentials ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credential:
    token: str
    expires: float
    user: str


class ClusterCredentials:
    """Issues and checks cluster credentials with keys derived from the secrets key ring
    (the first key signs; every key of the ring is accepted, so a rotation keeps the
    credentials issued before it until they expire)."""

    def __init__(self, ring: list[bytes], ttl: float, clock: Callable[[], float] = time.time):
        if not ring:
            raise ValueError("cluster credentials: no key")
        self.ttl = ttl
        self.clock = clock
        self._keys = [hmac.new(key, _PURPOSE, hashlib.sha256).digest() for key in ring]
        self._ids = [hashlib.sha256(key).hexdigest()[:8] for key in self._keys]

    def issue(self, namespace: str, name: str, uid: str, generation: int = 0) -> Credential:
        now = self.clock()
        expires = now + self.ttl
        claims = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": user_name(namespace, name),
            "ns": namespace,
            "name": name,
            "uid": uid,
            "gen": generation,
            "iat": int(now),
            "exp": expires,
        }
        token = jwt.encode(
            claims, self._keys[0], algorithm=_ALGORITHM, headers={"kid": self._ids[0]}
        )
        return Credential(token, expires, user_name(namespace, name))

    def claims(self, token: str) -> dict[str, Any] | None:
        """The claims of a valid credential (signed by a key of the ring, not expired)."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        kid = header.get("kid")
        if header.get("alg") != _ALGORITHM or kid not in self._ids:
            return None
        key = self._keys[self._ids.index(kid)]
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[_ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                options={"require": ["exp", "iss", "aud", "sub"], "verify_exp": False,
                         "verify_iat": False},
                leeway=0,
            )
        except jwt.PyJWTError:
            return None
        if claims["sub"] != user_name(str(claims.get("ns")), str(claims.get("name"))):
            return None
        if claims["exp"] <= self.clock():
            return None
        return claims

    async def check(self, token: str) -> tuple[User | None, float | None]:
        """The authenticator's bearer check: the cluster's user and the credential's expiry."""
        claims = self.claims(token)
        if claims is None:
            return None, None
        user = ClusterUser(claims["sub"], (GROUP, AUTHENTICATED), uid=str(claims.get("uid", "")),
                           generation=int(claims.get("gen") or 0))  # fmt: skip
        return user, float(claims["exp"])


# revocation -------------------------------------------------------------------------------

GENERATIONS = "/_pull/credentials/"
"""``<prefix><cluster uid>``: the cluster's credential generation; a credential issued for
an older one is refused. No route reads it; only the API writes it."""


async def generation(store: Store, uid: str) -> int:
    """The credential generation of the cluster of uid ``uid`` (0: never revoked)."""
    try:
        record = await store.get(GENERATIONS + uid)
    except NotFound:
        return 0
    return int(orjson.loads(record.value).get("generation", 0))


async def next_generation(store: Store, uid: str, by: str) -> int:
    """Move the cluster's credential generation on, by compare-and-swap: every credential
    issued before is refused from now on. The new generation."""
    key = GENERATIONS + uid
    while True:
        try:
            record = await store.get(key)
        except NotFound:
            try:
                await store.create(key, orjson.dumps({"generation": 1, "by": by}))
            except AlreadyExists:
                continue
            return 1
        current = int(orjson.loads(record.value).get("generation", 0))
        try:
            await store.update(key, orjson.dumps({"generation": current + 1, "by": by}),
                               record.revision)  # fmt: skip
        except Conflict:
            continue
        return current + 1


async def refusal(store: Store, user: User, own: ClusterId) -> str | None:
    """Why the credential of cluster identity ``user`` is no longer honoured, or None: its
    Cluster was deleted (or is being deleted, or registered again: another uid), or its
    credentials were revoked after it was issued."""
    who = f"cluster {own.namespace}/{own.name}"
    kind = registry.BY_PLURAL[("kubernetes", "clusters")]
    try:
        record = await store.get(kind.key(own.name, own.namespace))
    except NotFound:
        return f"credential revoked: {who} was deleted"
    metadata = orjson.loads(record.value).get("metadata") or {}
    uid = getattr(user, "uid", "")
    if metadata.get("uid") != uid:
        return f"credential revoked: {who} was deleted (one of that name was registered since)"
    if metadata.get("deleted"):
        return f"credential revoked: {who} is being deleted"
    if getattr(user, "generation", 0) < await generation(store, uid):
        return f"credential revoked: the credentials of {who} were revoked after it was issued"
    return None
