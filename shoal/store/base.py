"""The store protocol: a revisioned key-value store with compare-and-swap and watch.

Every write bumps one store-wide revision (as etcd does). An object's
revision is the revision of its last change and is what the API calls
``metadata.resource_version``. Values are opaque bytes to the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable


class StoreError(Exception):
    """Base of the errors a store raises."""


class AlreadyExists(StoreError):
    pass


class NotFound(StoreError):
    pass


class Conflict(StoreError):
    """The object changed since the revision the writer expected."""

    def __init__(self, key: str, expected: int, actual: int | None) -> None:
        super().__init__(f"{key}: expected revision {expected}, found {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual


class Compacted(StoreError):
    """The requested revision is older than the oldest one the store still keeps."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"revision {requested} is compacted; oldest kept is {compacted + 1}")
        self.requested = requested
        self.compacted = compacted


class Unavailable(StoreError):
    """The store cannot be reached right now (retry later)."""


class EventType(str, Enum):  # noqa: UP042  (str() of a member stays "EventType.X")
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Record:
    key: str
    value: bytes
    revision: int


@dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    key: str
    value: bytes
    revision: int


def prefix_end(prefix: str) -> str:
    """Smallest string greater than every string starting with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


@runtime_checkable
class Store(Protocol):
    async def get(self, key: str) -> Record:
        """The current record of ``key``; NotFound if there is none."""
        ...

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> tuple[list[Record], int]:
        """Records under ``prefix`` in key order, and the store revision they were read at."""
        ...

    async def create(self, key: str, value: bytes) -> int:
        """Write a new key; AlreadyExists if present. Returns the new revision."""
        ...

    async def update(self, key: str, value: bytes, expected_revision: int | None = None) -> int:
        """Replace a key, only if its revision is ``expected_revision`` (when given)."""
        ...

    async def delete(self, key: str, expected_revision: int | None = None) -> int:
        """Remove a key, only if its revision is ``expected_revision`` (when given)."""
        ...

    def watch(self, prefix: str, from_revision: int | None = None) -> AsyncIterator[Event]:
        """Events under ``prefix`` with revision > ``from_revision`` (default: from now on).

        Raises Compacted (on first iteration) when ``from_revision`` is too old.
        Ends (StopAsyncIteration) when the store drops a watcher that fell behind;
        the caller resumes from the last revision it saw.
        """
        ...

    async def revision(self) -> int:
        """The current store revision."""
        ...

    async def check_revision(self, revision: int) -> None:
        """Raise Compacted if the history after ``revision`` is no longer kept."""
        ...

    def batch(self) -> AbstractAsyncContextManager[None]:
        """Group the writes of a block for speed (one commit where the store can).

        Every write in it keeps its own compare-and-swap and revision; the block
        must not await anything but this store's calls.
        """
        ...

    async def compact(self, revision: int) -> None:
        """Forget history up to and including ``revision``."""
        ...

    async def close(self) -> None: ...
