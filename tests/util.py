"""Small helpers shared by the tests: an API on a fresh store, free ports and waiting on
conditions.

Ports and waiting are ``shoal.testing``'s, which the benches use too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Literal

from shoal.api.auth import Security
from shoal.api.auth.roles import defaults
from shoal.api.server import ApiServer, start_api
from shoal.store.sqlite import SqliteStore
from shoal.system.components import NAMES
from shoal.testing import shipped
from shoal.testing.launch import free_port, free_ports
from shoal.testing.wait import wait_for

__all__ = ["api_server", "free_port", "free_ports", "made_by_tests", "up_port", "wait_for"]

SHIPPED: Literal["shipped"] = "shipped"


@contextlib.asynccontextmanager
async def api_server(
    *, security: Security | Literal["shipped"] | None = SHIPPED, **options: Any
) -> AsyncIterator[ApiServer]:
    """The API on an in-memory SQLite store, on a free loopback port (``start_api`` options).

    It has the security ``shoal up`` ships (``shoal.testing.shipped``: callers need a
    token, such as the ``client`` fixture's); ``security=None`` is an open API, for the
    tests that need one, saying why beside the call.
    """
    chosen = shipped.security() if security == SHIPPED else security
    assert not isinstance(chosen, str)
    server = await start_api(SqliteStore(":memory:"), security=chosen, **options)
    server.own_store = True
    try:
        yield server
    finally:
        await server.stop()


def up_port() -> int:
    """A port for ``shoal up --port``: its API there, each component's metrics on the next
    ones (``shoal.system.metrics_ports``), all of them free."""
    return free_ports(1 + len(NAMES))


SHIPPED_ROLES = frozenset(o.metadata.name for o in defaults())
"""The roles and bindings the shipped API creates at its first start (``shoal-admin``…)."""


def made_by_tests(items: list[Any]) -> list[Any]:
    """``items`` of a list answer (JSON) without the shipped API's default roles and bindings."""
    return [i for i in items if i["metadata"]["name"] not in SHIPPED_ROLES]
