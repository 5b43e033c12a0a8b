"""Stored object bytes ⇄ wire bytes.

Stored values are the compact JSON of the object with
``"resource_version":null``; the revision is a property of the store record,
not of the bytes, so it is spliced in when an object leaves the API. The first
occurrence of that key is always the object's own metadata (``api``, ``kind``
and ``metadata`` are serialised first, and an escaped quote inside a string
can never form the unescaped key), so no parse is needed on reads and lists.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

from shoal.model.base import Kind

K = TypeVar("K", bound=Kind)

_PLACEHOLDER = b'"resource_version":null'


def encode(obj: Kind) -> bytes:
    """Stored form of ``obj`` (its resource_version left out)."""
    obj.metadata.resource_version = None
    return obj.model_dump_json().encode()


def with_revision(value: bytes, revision: int) -> bytes:
    return value.replace(_PLACEHOLDER, b'"resource_version":%d' % revision, 1)


def revision_of(value: bytes) -> int:
    """The revision spliced into wire bytes by ``with_revision``."""
    marker = b'"resource_version":'
    start = value.index(marker) + len(marker)
    end = start
    while value[end : end + 1].isdigit():
        end += 1
    return int(value[start:end])


def rfc3339(moment: datetime) -> str:
    """``moment`` spelled as pydantic spells UTC datetimes (naive means UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def decode(kind: type[K], value: bytes, revision: int) -> K:
    obj = kind.model_validate_json(value)
    obj.metadata.resource_version = revision
    return obj


def list_body(api: str, kind: str, revision: int, items: list[bytes], cont: str | None) -> bytes:
    meta = b'{"resource_version":%d' % revision
    if cont:
        meta += b',"continue":"' + cont.encode() + b'"'
    meta += b"}"
    return (
        b'{"api":"'
        + api.encode()
        + b'","kind":"'
        + kind.encode()
        + b'List","metadata":'
        + meta
        + b',"items":['
        + b",".join(items)
        + b"]}"
    )
