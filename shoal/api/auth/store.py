"""The API's store when security is on: secrets sealed, fields the server owns kept.

Secret fields (``secrets.SECRETS``) are encrypted on the way in and
decrypted on the way out when a key is configured; an update that carries
the redacted placeholder keeps the stored value. Fields in ``KEPT`` are
written once, at creation, and carried over by every later update (who asked
for a RescheduleTask), so no client can change them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson

from shoal.api.auth.context import WRITER_SEES_SECRETS
from shoal.api.auth.secrets import (
    REDACTED,
    Cipher,
    concrete,
    destinations_of_key,
    kinds_with_secrets,
    leaves,
    paths_of_key,
    secret_paths,
)
from shoal.machinery.problems import ProblemError
from shoal.model.scheduling import RescheduleTask
from shoal.store.base import Event, Record, Store

KEPT: dict[str, tuple[str, ...]] = {RescheduleTask.key_prefix(): ("spec", "requested_by")}


def kept_path(key: str) -> tuple[str, ...] | None:
    """The field the API writes at creation and keeps on every update, for this key."""
    return _kept_path(key)


def _kept_path(key: str) -> tuple[str, ...] | None:
    for prefix, path in KEPT.items():
        if key.startswith(prefix):
            return path
    return None


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


class SecuredStore:
    def __init__(self, inner: Store, cipher: Cipher | None) -> None:
        self.inner = inner
        self.cipher = cipher

    def _seal(self, key: str, value: bytes, old: bytes | None = None) -> bytes:
        paths = paths_of_key(key)
        if paths is None:
            return value
        data = orjson.loads(value)
        kept = concrete(orjson.loads(old), paths) if old is not None else {}
        aad = key.encode()
        for at, secret in concrete(data, paths).items():
            node = data
            for part in at[:-1]:
                node = node[part]
            if secret == REDACTED and at in kept:
                if old is not None and not WRITER_SEES_SECRETS.get():
                    _same_destination(key, data, orjson.loads(old), at)
                node[at[-1]] = kept[at]  # the reader sent the placeholder back: keep the value
            elif self.cipher is not None and not self.cipher.sealed_for(secret, aad):
                node[at[-1]] = self.cipher.encrypt(secret, aad)
        return orjson.dumps(data)

    def _open(self, key: str, value: bytes) -> bytes:
        paths = paths_of_key(key)
        if paths is None or not value or self.cipher is None:
            return value
        data = orjson.loads(value)
        aad = key.encode()
        for container, name in list(leaves(data, paths)):
            container[name] = self.cipher.decrypt(container[name], aad)
        return orjson.dumps(data)

    def _record(self, record: Record) -> Record:
        if self.cipher is None or paths_of_key(record.key) is None:
            return record
        return Record(record.key, self._open(record.key, record.value), record.revision)

    async def get(self, key: str) -> Record:
        return self._record(await self.inner.get(key))

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> tuple[list[Record], int]:
        records, revision = await self.inner.list(prefix, start_after=start_after, limit=limit)
        one_kind = prefix.count("/") >= 3  # "/{api}/{plural}/...": every record of one kind
        if self.cipher is None or (one_kind and paths_of_key(prefix) is None):
            return records, revision
        return [self._record(r) for r in records], revision

    async def create(self, key: str, value: bytes) -> int:
        return await self.inner.create(key, self._seal(key, value))

    async def update(self, key: str, value: bytes, expected_revision: int | None = None) -> int:
        kept = _kept_path(key)
        secret = paths_of_key(key) is not None
        if kept is not None or (secret and REDACTED.encode() in value):
            old = (await self.inner.get(key)).value
            if kept is not None:
                value = _carry(value, old, kept)
            if secret:
                value = self._seal(key, value, old)
        elif secret:
            value = self._seal(key, value)
        return await self.inner.update(key, value, expected_revision)

    async def check_update(self, key: str, value: bytes) -> None:
        """Refuse what ``update`` would refuse, writing nothing: a dry run answers as the
        write would (a placeholder sent to another destination is a 403 there too)."""
        if paths_of_key(key) is not None and REDACTED.encode() in value:
            self._seal(key, value, (await self.inner.get(key)).value)

    async def delete(self, key: str, expected_revision: int | None = None) -> int:
        return await self.inner.delete(key, expected_revision)

    async def watch(self, prefix: str, from_revision: int | None = None) -> AsyncIterator[Event]:
        async for event in self.inner.watch(prefix, from_revision):
            if self.cipher is None or paths_of_key(event.key) is None:
                yield event
            else:
                value = self._open(event.key, event.value)
                yield Event(event.type, event.key, value, event.revision)

    async def revision(self) -> int:
        return await self.inner.revision()

    async def check_revision(self, revision: int) -> None:
        await self.inner.check_revision(revision)

    def batch(self) -> AbstractAsyncContextManager[None]:
        return self.inner.batch()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()


def _same_destination(key: str, new: Any, old: Any, secret: tuple[Any, ...]) -> None:
    """Refuse a write that keeps a secret it never saw but sends it somewhere else."""
    paths = destinations_of_key(key)
    before, after = concrete(old, paths), concrete(new, paths)
    for at in sorted(set(before) | set(after), key=str):
        if before.get(at) != after.get(at):
            field = ".".join(str(p) for p in at)
            kept = ".".join(str(p) for p in secret)
            raise ProblemError(
                403,
                f"{field}: changes where the secret {kept} is sent, which the writer never "
                f"saw; send the secret itself instead of the placeholder (or ask for the "
                f"secrets verb)",
                errors=[{"field": field, "reason": "changes where a kept secret is sent"}],
            )


def _carry(value: bytes, old: bytes, path: tuple[str, ...]) -> bytes:
    """``value`` with the field at ``path`` as it is in ``old``."""
    data, before = orjson.loads(value), _at(orjson.loads(old), path)
    if _at(data, path) == before:
        return value
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = before
    return orjson.dumps(data)


async def reencrypt(store: Store, cipher: Cipher) -> int:
    """Encrypt every secret field again with the current key (rotation); the count rewritten."""
    sealed = SecuredStore(store, cipher)
    count = 0
    for kind in kinds_with_secrets():
        paths = secret_paths(kind)
        records, _ = await store.list(kind.key_prefix())
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
