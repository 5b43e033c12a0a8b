"""Run the API server inside an event loop (``shoal api``, ``shoal up``, tests)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from shoal.api.app import create_app
from shoal.api.auth import Protection, Security, protect
from shoal.api.auth.tls import tls_options
from shoal.store.base import Store
from shoal.store.factory import open_store

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the embedding process owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class ApiServer:
    url: str
    store: Store
    server: uvicorn.Server
    task: asyncio.Task[None]
    own_store: bool
    protection: Protection | None = None

    async def stop(self) -> None:
        self.server.should_exit = True
        # Watches never end on their own: let uvicorn cancel them after a short grace.
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.task), 3)
        if not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.protection is not None:
            await self.protection.stop()
        if self.own_store:
            await self.store.close()


def bind_socket(host: str, port: int) -> socket.socket:
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets whose proto says
    # TCP; with proto 0, Nagle and delayed ACKs add ~40 ms to every small response.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def start_api(
    store: Store | str = "sqlite://:memory:",
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    log_level: str = "warning",
    security: Security | None = None,
) -> ApiServer:
    """Start the API on ``host:port`` (0: any free port) and return once it accepts requests.

    Without ``security`` the API is open (anonymous, always-allow): library use and tests.
    """
    own = isinstance(store, str)
    the_store = open_store(store) if isinstance(store, str) else store
    protection = protect(security, the_store) if security is not None else None
    if protection is not None:
        await protection.start()
    app = create_app(the_store, security=protection)
    sock = bind_socket(host, port)
    actual = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
        **tls_options(security.tls if security is not None else None),
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.005)
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if security is not None and security.tls is not None else "http"
    return ApiServer(f"{scheme}://{shown}:{actual}", the_store, server, task, own, protection)
