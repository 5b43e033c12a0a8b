"""Secret fields: encrypted at rest (AES-GCM), redacted for readers without the right.

Credentials are found in each kind's model: every field named ``token`` or
``password`` (provider tokens and passwords, cloud passwords, IM
credentials) and every user of a ``kubeconfig``; a kind added later is
covered without a line here. The API
wraps its store in ``SecuredStore``: those fields are encrypted before they
reach SQLite or etcd and decrypted when read, so nothing above the store
changes. Readers without the ``secrets`` verb on the resource get
``REDACTED`` in their place; an update that sends ``REDACTED`` back keeps the
stored value.

Keys: one or more base64 32-byte keys, one a line (file) or comma-separated
(environment); the first encrypts, every one decrypts. Rotation: put a new
key first, run ``shoal secrets reencrypt``, then drop the old key.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel

from shoal.model import registry
from shoal.model.base import Kind

REDACTED = "<redacted: needs the secrets verb>"
_PREFIX = "shoal:aesgcm:v1:"

Path_ = tuple[str, ...]  # "*": every item of a list or value of a mapping

SECRET_NAMES = frozenset({"token", "password"})
"""A field of a kind's spec with one of these names holds a credential (any kind, any depth)."""
KUBECONFIG_USERS: Path_ = ("users", "*", "user", "*")
"""In a field named ``kubeconfig``: every credential of every user."""


def _models_in(annotation: Any) -> Iterator[tuple[type[BaseModel], bool]]:
    """The models an annotation holds, and whether as items of a list or mapping."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, False
        return
    origin, args = get_origin(annotation), get_args(annotation)
    many = origin in (list, tuple, set, frozenset, dict)
    for arg in args[1:] if origin is dict else args:
        for model, inner in _models_in(arg):
            yield model, many or inner


def _model_paths(model: type[BaseModel], at: Path_, seen: frozenset[type]) -> Iterator[Path_]:
    """Secret leaves under ``model``: named fields holding plain values (a model named
    ``password``, such as OpenStack's password auth, is looked into instead)."""
    for name, field in model.model_fields.items():
        if issubclass(model, Kind) and name in _NOT_SPEC:
            continue
        here = (*at, field.serialization_alias or field.alias or name)
        inside = list(_models_in(field.annotation))
        if name in SECRET_NAMES and not inside:
            yield here
        elif name == "kubeconfig":
            yield (*here, *KUBECONFIG_USERS)
        for inner, many in inside:
            if inner not in seen:
                yield from _model_paths(inner, (*here, "*") if many else here, seen | {inner})


_NOT_SPEC = frozenset({"api", "kind", "metadata", "status"})

DESTINATION_NAMES = frozenset({"url", "endpoint", "server", "host", "auth_url"})
"""A field with one of these names, in a model that holds a secret or in one around it,
says where the secret is sent."""
DESTINATION_REFERENCES = frozenset({"infrastructure_provider"})
"""A reference with one of these names, beside a secret, names the object the secret is sent
to (a cloud's provider): the whole reference, with the uid the API resolved, is a destination."""
KUBECONFIG_DESTINATIONS: tuple[Path_, ...] = (
    ("clusters",),
    ("contexts",),
    ("current-context",),
)
"""In a ``kubeconfig``: which server, CA and TLS settings each user's credential goes with."""


def _has_secret(model: type[BaseModel], seen: frozenset[type]) -> bool:
    return any(True for _ in _model_paths(model, (), seen | {model}))


def _destination_paths(
    model: type[BaseModel], at: Path_, seen: frozenset[type]
) -> Iterator[Path_]:
    """The destination fields of every model under ``model`` that holds a secret."""
    holds = _has_secret(model, seen)
    for name, field in model.model_fields.items():
        if issubclass(model, Kind) and name in _NOT_SPEC:
            continue
        here = (*at, field.serialization_alias or field.alias or name)
        inside = list(_models_in(field.annotation))
        if holds and (
            (name in DESTINATION_NAMES and not inside) or name in DESTINATION_REFERENCES
        ):
            yield here
        elif name == "kubeconfig":
            yield from ((*here, *path) for path in KUBECONFIG_DESTINATIONS)
        for inner, many in inside:
            if inner not in seen:
                yield from _destination_paths(
                    inner, (*here, "*") if many else here, seen | {inner}
                )


@functools.cache
def secret_paths(kind: type[Kind]) -> tuple[Path_, ...]:
    """Where a kind keeps credentials: found in its model, so new kinds are covered."""
    return tuple(dict.fromkeys(_model_paths(kind, (), frozenset({kind}))))


@functools.cache
def destination_paths(kind: type[Kind]) -> tuple[Path_, ...]:
    """Where a kind's credentials are sent (URLs, a kubeconfig's clusters): a write that
    keeps a secret by sending the placeholder back may not change them (``SecuredStore``)."""
    return tuple(dict.fromkeys(_destination_paths(kind, (), frozenset({kind}))))


def paths_of_resource(api: str, plural: str) -> tuple[Path_, ...] | None:
    """The secret paths of the kind at ``/{api}/.../{plural}``; None when it has none."""
    kind = registry.BY_PLURAL.get((api, plural))
    return (secret_paths(kind) or None) if kind is not None else None


def destinations_of_key(key: str) -> tuple[Path_, ...]:
    """The destination paths of the kind a store key belongs to."""
    parts = key.split("/", 3)
    kind = registry.BY_PLURAL.get((parts[1], parts[2])) if len(parts) > 2 else None
    return destination_paths(kind) if kind is not None else ()


def paths_of_key(key: str) -> tuple[Path_, ...] | None:
    """The secret paths of the kind a store key (``/{api}/{plural}/...``) belongs to."""
    parts = key.split("/", 3)
    return paths_of_resource(parts[1], parts[2]) if len(parts) > 2 else None


def kinds_with_secrets() -> list[type[Kind]]:
    return [kind for kind in registry.KINDS if secret_paths(kind)]


def leaves(data: Any, paths: tuple[Path_, ...]) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every present, non-null secret value in ``data``."""
    for path in paths:
        yield from _walk(data, path)


def _walk(node: Any, path: Path_) -> Iterator[tuple[Any, Any]]:
    if not path:
        return
    head, rest = path[0], path[1:]
    if head == "*":
        keys: Any = (
            range(len(node))
            if isinstance(node, list)
            else (list(node) if isinstance(node, dict) else ())
        )
    else:
        keys = (head,) if isinstance(node, dict) and head in node else ()
    for key in keys:
        if not rest:
            if node[key] is not None:
                yield node, key
        else:
            yield from _walk(node[key], rest)


def redact(data: Any, paths: tuple[Path_, ...]) -> None:
    for container, key in leaves(data, paths):
        container[key] = REDACTED


def concrete(data: Any, paths: tuple[Path_, ...]) -> dict[tuple[Any, ...], Any]:
    """Every secret value by its concrete path (list indices and mapping keys spelled out)."""
    found: dict[tuple[Any, ...], Any] = {}

    def walk(node: Any, path: Path_, at: tuple[Any, ...]) -> None:
        if not path:
            found[at] = node
            return
        head, rest = path[0], path[1:]
        if head == "*":
            items = (
                enumerate(node)
                if isinstance(node, list)
                else (node.items() if isinstance(node, dict) else ())
            )
            for key, child in items:
                walk(child, rest, (*at, key))
        elif isinstance(node, dict) and head in node and node[head] is not None:
            walk(node[head], rest, (*at, head))

    for path in paths:
        walk(data, path, ())
    return found


class Cipher:
    """AES-GCM with a key ring; values are bound to their store key (associated data)."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise ValueError("secrets: no key")
        for key in keys:
            if len(key) != 32:
                raise ValueError("secrets: a key must be 32 bytes (base64 of 32 random bytes)")
        self.ids = [hashlib.sha256(k).hexdigest()[:8] for k in keys]
        self._ring = {kid: AESGCM(k) for kid, k in zip(self.ids, keys, strict=True)}

    @property
    def current(self) -> str:
        return self.ids[0]

    def encrypt(self, value: Any, aad: bytes) -> str:
        nonce = os.urandom(12)
        sealed = self._ring[self.current].encrypt(nonce, orjson.dumps(value), aad)
        return f"{_PREFIX}{self.current}:{base64.b64encode(nonce + sealed).decode()}"

    def decrypt(self, text: Any, aad: bytes) -> Any:
        if not isinstance(text, str) or not text.startswith(_PREFIX):
            return text  # stored before encryption was turned on
        kid, _, blob = text[len(_PREFIX) :].partition(":")
        raw = base64.b64decode(blob)
        return orjson.loads(self._ring[kid].decrypt(raw[:12], raw[12:], aad))

    def key_id(self, text: Any) -> str | None:
        if isinstance(text, str) and text.startswith(_PREFIX):
            return text[len(_PREFIX) :].partition(":")[0]
        return None


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def load_keys(key_file: Path | None, env: str | None) -> list[bytes] | None:
    """The key ring from ``key_file``, else from the environment variable ``env``; else None.

    The first key is the current one. Besides sealing secret fields, the ring signs the
    credentials of pull clusters (``shoal.api.auth.clusters``), each with a key derived
    from it."""
    text = None
    if key_file is not None:
        text = key_file.read_text()
    elif env and os.environ.get(env):
        text = os.environ[env].replace(",", "\n")
    if text is None:
        return None
    return [base64.b64decode(line.strip()) for line in text.splitlines() if line.strip()]


def load_cipher(key_file: Path | None, env: str | None) -> Cipher | None:
    """The cipher of the key ring from ``key_file``, else from ``env``; else None."""
    keys = load_keys(key_file, env)
    return Cipher(keys) if keys is not None else None
