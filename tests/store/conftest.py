"""Store fixtures: every contract test runs once per implementation.

SQLite runs twice: in memory (a commit per write) and on a file (group
commit, reads on a second connection). ``store_factory`` (sync) builds a
fresh, unconnected store, so tests that run
their own event loop (hypothesis state machines) can open stores inside it;
``store`` is a ready store for the test's loop; ``prefix`` is a key prefix
unique to the test (the etcd server is shared by the session).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from shoal.store.base import Store
from shoal.store.etcd import EtcdStore
from shoal.store.sqlite import SqliteStore
from tests.fixtures.etcd import etcd_cluster, etcd_server, etcd_url  # noqa: F401  (fixtures)

StoreFactory = Callable[[], Store]


@pytest.fixture(
    params=["sqlite", "sqlite-file", pytest.param("etcd", marks=pytest.mark.integration)]
)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if request.param == "sqlite":
        return lambda: SqliteStore(":memory:")  # one commit per write
    if request.param == "sqlite-file":  # group commit, reads on a second connection
        files = itertools.count()
        return lambda: SqliteStore(str(tmp_path / f"store-{next(files)}.db"))
    url: str = request.getfixturevalue("etcd_url")
    return lambda: EtcdStore.from_url(url)


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    instance = store_factory()
    try:
        yield instance
    finally:
        await instance.close()


@pytest.fixture
def prefix() -> str:
    return f"/test/{uuid.uuid4().hex[:12]}/"
