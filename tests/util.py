"""Small helpers shared by the tests: an API on a fresh store, free ports and waiting on
conditions.

Ports and waiting are ``shoal.testing``'s, which the benches use too.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from shoal.api.auth import Security
from shoal.api.auth.roles import defaults
from shoal.api.server import ApiServer, start_api
from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import NotFound, ShoalClient
from shoal.model.base import Kind
from shoal.model.kubernetes import Cluster
from shoal.store.sqlite import SqliteStore
from shoal.system.components import NAMES
from shoal.testing import shipped
from shoal.testing.launch import free_port, free_ports
from shoal.testing.wait import wait_for

__all__ = [
    "all_started",
    "api_server",
    "free_port",
    "free_ports",
    "gone",
    "kube_clients",
    "kubectl",
    "made_by_tests",
    "member_apis",
    "serving",
    "started",
    "until_gone",
    "up_port",
    "wait_for",
]

SHIPPED: Literal["shipped"] = "shipped"


class Part(Protocol):
    """A part of Shoal a test runs in-process: a controller, a scheduler, a collector."""

    async def start(self) -> Any: ...

    async def stop(self) -> Any: ...


P = TypeVar("P", bound=Part)


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


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A plain HTTP server answering with ``handler`` on a free loopback port, in a thread;
    its URL. For a peer that is not Shoal (a proxy, a wrong server, an echo)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.asynccontextmanager
async def member_apis(
    clusters: list[Cluster], timeout: float
) -> AsyncIterator[dict[str, KubeCluster]]:
    """Each registered cluster's own Kubernetes API by name, to check what runs there."""
    async with kube_clients(timeout) as clients:
        yield {c.metadata.name: await clients.get(c) for c in clusters}


@contextlib.asynccontextmanager
async def kube_clients(timeout: float) -> AsyncIterator[KubeClients]:
    """Clients of member clusters' own Kubernetes APIs, closed after the block."""
    clients = KubeClients(timeout=timeout)
    try:
        yield clients
    finally:
        await clients.close()


async def gone(
    client: ShoalClient, kind: type[Kind], name: str, namespace: str | None = None
) -> bool:
    """Whether the API answers 404 for ``kind`` ``name``: deleted, its finalizers done."""
    try:
        await client.get(kind, name, namespace)
    except NotFound:
        return True
    return False


async def until_gone(
    client: ShoalClient,
    kind: type[Kind],
    name: str,
    namespace: str | None = None,
    timeout: float = 10.0,
) -> None:
    """Waits until ``kind`` ``name`` is deleted, its finalizers done."""
    await wait_for(lambda: gone(client, kind, name, namespace), timeout=timeout,
                   message=f"{kind.__name__} {name} deleted")  # fmt: skip


@contextlib.asynccontextmanager
async def started(part: P) -> AsyncIterator[P]:
    """``part`` running for the block, stopped after it however it ends."""
    await part.start()
    try:
        yield part
    finally:
        await part.stop()


async def kubectl(kubeconfig: Path, *args: str) -> str:
    """``kubectl --kubeconfig KUBECONFIG ARGS``, which must succeed; its output."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


@contextlib.asynccontextmanager
async def all_started(*parts: Part) -> AsyncIterator[None]:
    """``parts`` started in order for the block, stopped in the reverse order after it."""
    async with contextlib.AsyncExitStack() as stack:
        for part in parts:
            await stack.enter_async_context(started(part))
        yield
