"""One store from a URL, so servers, benches and tests pick a backend by configuration.

Kept apart from ``base`` so the protocol imports no implementation.
"""

from __future__ import annotations

from shoal.store.base import Store
from shoal.store.etcd import EtcdStore
from shoal.store.sqlite import SqliteStore


def open_store(url: str) -> Store:
    """A store for ``sqlite:///path``, ``sqlite://:memory:`` or ``etcd://host:port[,host:port]``."""
    if url.startswith("sqlite://"):
        path = url[len("sqlite://") :]
        if path.startswith("/") and path != "/:memory:":
            return SqliteStore(path)
        return SqliteStore(":memory:" if path in ("", ":memory:", "/:memory:") else path)
    if url.startswith("etcd://"):
        return EtcdStore.from_url(url)
    raise ValueError(f"unknown store URL {url!r}: use sqlite:///path or etcd://host:port")
