"""Embedded HTTP servers: uvicorn on the running event loop, for the API, the agents and the
simulated clusters alike.

The socket is bound first, so port 0 works and the URL is known before the first request.
uvicorn's signal handlers stay off: the embedding process (``shoal up``, a test, a
benchmark) owns SIGINT and SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from shoal.machinery.tls import Tls, tls_options


def tune_gc() -> None:
    """Collect less often, as every Shoal server process does before it serves.

    Informer caches, stores and the simulator hold hundreds of thousands of small acyclic
    objects: with Python's default thresholds the young generation is collected every 700
    allocations, and full collections keep walking them all (two thirds of a task
    controller's time at 10,000 applications; a tenth of an API create's). What exists at
    start is frozen out of the collector's sight.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: any free port).

    proto=IPPROTO_TCP and TCP_NODELAY: each accepted connection sends small answers at once,
    not after Nagle and delayed ACKs (about 40 ms each).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """None: whoever embeds the server owns SIGINT/SIGTERM."""
        yield


@dataclass
class Served:
    """A running server: its URL, and ``stop``."""

    url: str
    server: uvicorn.Server
    task: asyncio.Task[None]
    sock: socket.socket

    async def stop(self, wait: float = 3.0) -> None:
        """Stop accepting; requests still open (watches never end by themselves) are given
        the graceful period, then cut after ``wait`` seconds."""
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.task), wait)
        if not self.task.done():
            self.server.force_exit = True
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.sock.close()


async def serve(
    app: Any,
    sock: socket.socket,
    host: str,
    *,
    tls: Tls | None = None,
    log_level: str = "warning",
    grace: int = 1,
    **options: Any,
) -> Served:
    """Serve ``app`` on ``sock`` (bound by ``listen(host, …)``) and return once it accepts
    connections. The URL names ``host`` as given, so that it matches a certificate's name.

    ``options``: more ``uvicorn.Config`` keywords (``http="httptools"``…).
    """
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=grace,
        **{**options, **tls_options(tls)},  # a TLS listener with a client CA sets its own http
    )
    server = _Server(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the server stopped during start-up")
        await asyncio.sleep(0.005)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return Served(f"{'https' if tls is not None else 'http'}://{shown}:{port}", server, task, sock)
