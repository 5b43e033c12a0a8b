"""The RBAC index follows the store: what it lists, what it watches after, what it forgets.

The index lists roles and bindings, then watches from the revision of that list, so a
change made between the two is not lost; a watch the store ends is resumed from the last
event seen; a list made again (after a compaction) forgets what was deleted meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from shoal.api.auth.authn import authenticated
from shoal.api.auth.rbac import NOTHING, Rbac
from shoal.model.base import Metadata
from shoal.model.core import Role, RoleBinding, RoleRule
from shoal.store.base import Compacted, Event
from shoal.store.sqlite import SqliteStore
from shoal.testing.wait import wait_for

ALICE = authenticated("alice")


def role(name: str, namespace: str) -> Role:
    rule = RoleRule(api="kubernetes", resources=["applications"], namespaces=[namespace],
                    verbs=["get"])  # fmt: skip
    return Role(metadata=Metadata(name=name), rules=[rule])


def bound(name: str, roles: list[str]) -> RoleBinding:
    return RoleBinding(metadata=Metadata(name=name), users=["alice"], roles=roles)


async def put(store: SqliteStore, obj: Role | RoleBinding) -> int:
    return await store.create(obj.store_key(), orjson.dumps(obj.model_dump(mode="json")))


def namespaces(rbac: Rbac) -> frozenset[str]:
    return rbac.grant(ALICE, "kubernetes", "applications", "get").namespaces


class Interrupting(SqliteStore):
    """A store that, once, writes ``late`` when a watch starts (after the index's list),
    and ends that watch after its first event (a stream the store drops), writing
    ``after_drop`` before the index resumes."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.late: list[Any] = []
        self.after_drop: list[Any] = []
        self.watches: list[int | None] = []

    async def watch(self, prefix: str, from_revision: int | None = None) -> AsyncIterator[Event]:
        self.watches.append(from_revision)
        for obj in self.late:
            await put(self, obj)
        self.late = []
        async for event in super().watch(prefix, from_revision):
            yield event
            if self.after_drop:
                for obj in self.after_drop:
                    await put(self, obj)
                self.after_drop = []
                return


async def test_changes_between_the_list_and_the_watch_are_not_lost() -> None:
    store = Interrupting()
    await put(store, role("ra", "a"))
    await put(store, bound("alice-a", ["ra"]))
    store.late = [role("rb", "b"), bound("alice-b", ["rb"])]
    store.after_drop = [role("rc", "c"), bound("alice-c", ["rc"])]
    rbac = Rbac(store)
    await rbac.start()
    try:
        async def all_three() -> bool:
            return namespaces(rbac) == {"a", "b", "c"}

        await wait_for(all_three, timeout=10, message="the index has a, b and c")
        listed, resumed = store.watches[0], store.watches[1]
        assert listed is not None and resumed is not None and resumed > listed
    finally:
        await rbac.stop()
    assert rbac._task is not None and rbac._task.done()
    await store.close()


async def test_a_list_made_again_forgets_what_was_deleted() -> None:
    store = SqliteStore(":memory:")
    for obj in (role("ra", "a"), role("rb", "b"), bound("alice-a", ["ra"]),
                bound("alice-b", ["rb"])):  # fmt: skip
        await put(store, obj)
    rbac = Rbac(store)
    await rbac._load()
    assert namespaces(rbac) == {"a", "b"}
    await store.delete(role("ra", "a").store_key())  # while the index was not watching
    await rbac._load()
    assert namespaces(rbac) == {"b"}
    await store.delete(bound("alice-b", ["rb"]).store_key())
    await rbac._load()
    assert rbac.grant(ALICE, "kubernetes", "applications", "get") == NOTHING
    assert set(rbac._roles) == {"rb"} and set(rbac._bindings) == {"alice-a"}
    await store.close()


async def test_stop_ends_the_watch() -> None:
    store = SqliteStore(":memory:")
    rbac = Rbac(store)
    await rbac.start()
    task = rbac._task
    assert task is not None and not task.done()
    await rbac.stop()
    assert task.done() and task.cancelled()
    await rbac.stop()  # twice: nothing to do
    await asyncio.sleep(0)
    await store.close()


class Failing(SqliteStore):
    """A store whose first watch fails with ``error``; the next one writes ``late`` as it
    starts (after the index listed again)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(":memory:")
        self.error: Exception | None = error
        self.late: list[Any] = []

    async def watch(self, prefix: str, from_revision: int | None = None) -> AsyncIterator[Event]:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        for obj in self.late:
            await put(self, obj)
        self.late = []
        async for event in super().watch(prefix, from_revision):
            yield event


async def test_a_compacted_watch_lists_again_and_watches_from_there() -> None:
    store = Failing(Compacted(1, 5))
    await put(store, role("ra", "a"))
    await put(store, bound("alice-a", ["ra"]))
    store.late = [role("rb", "b"), bound("alice-b", ["rb"])]
    rbac = Rbac(store)
    await rbac.start()
    try:
        await wait_for(lambda: namespaces(rbac) == {"a", "b"}, timeout=10,
                       message="the index has a and b")  # fmt: skip
    finally:
        await rbac.stop()
    await store.close()


async def test_a_failed_watch_is_logged_and_resumed(caplog: pytest.LogCaptureFixture) -> None:
    store = Failing(RuntimeError("the store is gone"))
    rbac = Rbac(store)
    await rbac.start()
    try:
        await put(store, role("ra", "a"))
        await put(store, bound("alice-a", ["ra"]))
        await wait_for(lambda: namespaces(rbac) == {"a"}, timeout=10, message="resumed")
        failed = [r for r in caplog.records if r.name == "shoal.api.auth.rbac"]
        assert [r.getMessage() for r in failed] == ["RBAC index: watch failed; resuming"]
        assert failed[0].exc_info is not None
    finally:
        await rbac.stop()
    await store.close()


async def test_deletions_reach_the_index() -> None:
    store = SqliteStore(":memory:")
    await put(store, role("ra", "a"))
    await put(store, role("rb", "b"))
    await put(store, bound("alice", ["ra", "rb"]))
    rbac = Rbac(store)
    await rbac.start()
    try:
        assert namespaces(rbac) == {"a", "b"}
        await store.delete(role("ra", "a").store_key())
        await wait_for(lambda: namespaces(rbac) == {"b"}, timeout=10, message="ra deleted")
        await store.delete(bound("alice", []).store_key())
        await wait_for(lambda: namespaces(rbac) == frozenset(), timeout=10,
                       message="the binding deleted")  # fmt: skip
    finally:
        await rbac.stop()
    await store.close()


def test_forgetting_what_was_never_known_is_nothing() -> None:
    rbac = Rbac(SqliteStore(":memory:"))
    rbac.set_role("never", None)
    rbac.set_binding("never", None)
    assert rbac.grant(ALICE, "kubernetes", "applications", "get") == NOTHING
