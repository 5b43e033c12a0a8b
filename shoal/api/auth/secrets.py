"""Secret fields: encrypted at rest (AES-GCM), redacted for readers without the right.

The table ``SECRETS`` names, per kind, the fields that hold credentials:
kubeconfig users, provider tokens and passwords, cloud passwords. The API
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
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shoal.model.base import Kind
from shoal.model.core import GlobalMetricsProvider, MetricsProvider
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import Cluster
from shoal.store.base import Store

REDACTED = "<redacted: needs the secrets verb>"
_PREFIX = "shoal:aesgcm:v1:"

Path_ = tuple[str, ...]  # "*": every item of a list or value of a mapping

_PROVIDER: tuple[Path_, ...] = (("spec", "influx", "token"), ("spec", "influx", "password"))
_CLOUD: tuple[Path_, ...] = (("spec", "openstack", "auth", "password", "user", "password"),)
SECRETS: dict[type[Kind], tuple[Path_, ...]] = {
    Cluster: (("spec", "kubeconfig", "users", "*", "user", "*"),),
    MetricsProvider: _PROVIDER,
    GlobalMetricsProvider: _PROVIDER,
    Cloud: _CLOUD,
    GlobalCloud: _CLOUD,
}
BY_RESOURCE: dict[tuple[str, str], tuple[Path_, ...]] = {
    (k.api_name(), k.plural): paths for k, paths in SECRETS.items()
}
BY_PREFIX: tuple[tuple[str, tuple[Path_, ...]], ...] = tuple(
    (k.key_prefix(), paths) for k, paths in SECRETS.items()
)


def paths_of_key(key: str) -> tuple[Path_, ...] | None:
    for prefix, paths in BY_PREFIX:
        if key.startswith(prefix):
            return paths
    return None


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


def load_cipher(key_file: Path | None, env: str | None) -> Cipher | None:
    """The key ring from ``key_file``, else from the environment variable ``env``; else None."""
    text = None
    if key_file is not None:
        text = key_file.read_text()
    elif env and os.environ.get(env):
        text = os.environ[env].replace(",", "\n")
    if text is None:
        return None
    keys = [base64.b64decode(line.strip()) for line in text.splitlines() if line.strip()]
    return Cipher(keys)


async def reencrypt(store: Store, cipher: Cipher) -> int:
    """Encrypt every secret field again with the current key (rotation); the count rewritten."""
    from shoal.api.auth.store import SecuredStore

    sealed = SecuredStore(store, cipher)
    count = 0
    for prefix, paths in BY_PREFIX:
        records, _ = await store.list(prefix)
        for record in records:
            stale = [
                v
                for v in concrete(orjson.loads(record.value), paths).values()
                if cipher.key_id(v) != cipher.current
            ]
            if not stale:
                continue
            plain = sealed._open(record.key, record.value)
            await store.update(record.key, sealed._seal(record.key, plain), record.revision)
            count += 1
    return count
