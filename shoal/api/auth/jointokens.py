"""Bootstrap tokens that join one pull cluster: ``<id>.<secret>``, as kubeadm spells them.

Stored under ``/_pull/jointokens/<id>`` with the secret's SHA-256 only, so no
reader of the store (or of a backup) can use one. A token registers exactly one
cluster, once, before it expires: ``consume`` marks it used by a compare-and-swap
on the stored record, so of two joins racing with one token exactly one wins.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

import orjson

from shoal.machinery.problems import ProblemError
from shoal.store.base import AlreadyExists, Conflict, NotFound, Store

PREFIX = "/_pull/jointokens/"
SHAPE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
MAX_TTL = 7 * 24 * 3600.0
DEFAULT_TTL = 3600.0


def _random(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class NewToken:
    token: str
    id: str
    namespace: str
    expires: float
    cluster: str | None = None


async def create(
    store: Store,
    namespace: str,
    ttl: float,
    created_by: str,
    clock: Any = time.time,
    cluster: str | None = None,
) -> NewToken:
    """A new token for one cluster in ``namespace``, valid ``ttl`` seconds; with
    ``cluster``, for that cluster's name only (it joins a pull cluster that exists again)."""
    for _ in range(5):
        token_id, secret = _random(6), _random(16)
        expires = clock() + ttl
        record = {
            "id": token_id,
            "namespace": namespace,
            "sha256": _digest(secret),
            "expires": expires,
            "created_by": created_by,
            "cluster": cluster,
            "used": None,
        }
        try:
            await store.create(PREFIX + token_id, orjson.dumps(record))
        except AlreadyExists:  # an id taken by chance: draw again
            continue
        return NewToken(f"{token_id}.{secret}", token_id, namespace, expires, cluster)
    raise ProblemError(503, "join token: no free id found; try again")


def _refused(reason: str) -> ProblemError:
    return ProblemError(401, f"token: {reason}", errors=[{"field": "token", "reason": reason}])


@dataclass(frozen=True)
class Claim:
    """A token taken for one cluster: its namespace, and how to give it back (``release``)
    when the cluster could not be created after all."""

    namespace: str
    key: str
    revision: int
    before: bytes
    cluster: str | None = None  # the only name it joins, when made for one


async def consume(store: Store, token: Any, cluster: str, clock: Any = time.time) -> Claim:
    """Take ``token`` for ``cluster``; 401 naming why when it is malformed, unknown,
    expired or used. Exactly one caller takes a token: the write is a compare-and-swap."""
    match = SHAPE.match(token) if isinstance(token, str) else None
    if match is None:
        raise _refused("malformed: a join token reads <6 characters>.<16 characters>")
    token_id, secret = match.groups()
    key = PREFIX + token_id
    try:
        record = await store.get(key)
    except NotFound:
        raise _refused("not recognised") from None
    data = orjson.loads(record.value)
    if not hmac.compare_digest(str(data.get("sha256", "")), _digest(secret)):
        raise _refused("not recognised")
    if data.get("used") is not None:
        raise _refused("already used: a join token registers one cluster")
    if float(data.get("expires", 0)) <= clock():
        raise _refused("expired")
    named = data.get("cluster")
    if named is not None and named != cluster:
        raise _refused(f"made for cluster {named!r} only")
    used = {**data, "used": {"cluster": cluster, "at": clock()}}
    try:
        revision = await store.update(key, orjson.dumps(used), record.revision)
    except Conflict:
        raise _refused("already used: a join token registers one cluster") from None
    return Claim(str(data["namespace"]), key, revision, record.value, named)


async def release(store: Store, claim: Claim) -> None:
    """Give a token back unused (its cluster could not be created)."""
    try:
        await store.update(claim.key, claim.before, claim.revision)
    except (Conflict, NotFound):
        pass
