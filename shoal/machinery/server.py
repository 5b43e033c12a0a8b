"""Embedded HTTP servers: uvicorn on the running event loop, for the API, the agents and the
simulated clusters alike.

The socket is bound first, so port 0 works and the URL is known before the first request.
uvicorn's signal handlers stay off: the embedding process (``shoal up``, a test, a
benchmark) owns SIGINT and SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from shoal.machinery.keepalive import KEEP_ALIVE
from shoal.machinery.tls import Tls, tls_options

log = logging.getLogger("uvicorn.error")  # where uvicorn says the same of its own shutdown


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
    """uvicorn's server, embedded, and stopped in milliseconds.

    uvicorn looks at ``should_exit`` every 0.1 s, then sleeps 0.1 s after asking its
    connections to close, and polls them every 0.1 s: a stop took 0.2 s. Tests start and
    stop a server each, a thousand times a run. Here ``exit()`` wakes the main loop at once,
    and the shutdown polls the connections every 5 ms, with uvicorn's graceful timeout.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exiting = asyncio.Event()

    def exit(self) -> None:
        self.should_exit = True
        self._exiting.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """None: whoever embeds the server owns SIGINT/SIGTERM."""
        yield

    async def main_loop(self) -> None:
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):  # the date header's tick, as uvicorn's
                    await self._exiting.wait()
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                while (state.connections or state.tasks) and not self.force_exit:
                    await asyncio.sleep(0.005)
                for server in self.servers:
                    await server.wait_closed()
        except TimeoutError:
            log.error("Cancel %s running task(s), timeout graceful shutdown exceeded",
                      len(state.tasks))  # fmt: skip
            for task in state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()


@dataclass(frozen=True)
class ClientLimits:
    """What one client may hold of a server: a request (headers and body) must arrive
    within ``request_timeout`` seconds of the connection or of the previous answer, and
    one address holds at most ``connections`` connections that have not yet delivered
    their first request (and 16 times as many in all). Without them, clients that send
    half a request and wait hold a connection each, for ever.

    The cap counts connections still waiting for their first request, not busy ones: a
    legitimate client's new connection carries its request at once, while Shoal's own
    components, which share the API host's address, keep hundreds open between them
    (pools, watches) and must never be refused for it."""

    request_timeout: float = 30.0
    connections: int = 256


def _answer(status: str, text: str) -> bytes:
    body = text.encode()
    head = f"HTTP/1.1 {status}\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    return f"{head}content-length: {len(body)}\r\n\r\n".encode() + body


def limited(base: type[HttpToolsProtocol], limits: ClientLimits) -> type[HttpToolsProtocol]:
    """``base`` (uvicorn's httptools protocol, or a subclass) held to ``limits``; the
    connections are counted per server (each call counts its own)."""
    per_address: dict[str, int] = {}  # every open connection
    waiting: dict[str, int] = {}  # those that have not delivered their first request
    most = limits.connections * 16
    timeout = limits.request_timeout
    late = _answer("408 Request Timeout", f"request not received within {timeout:g} s")
    crowded = _answer("429 Too Many Requests",
                      f"at most {limits.connections} connections per client")  # fmt: skip

    class Limited(base):  # type: ignore[valid-type,misc]
        _address: str | None = None
        _first: bool = False  # its first request has not arrived yet
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            address = self.client[0] if self.client else ""
            if waiting.get(address, 0) >= limits.connections or per_address.get(
                address, 0
            ) >= most:
                transport.write(crowded)
                transport.close()
                return
            _count(per_address, address, 1)
            _count(waiting, address, 1)
            self._address, self._first = address, True
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._address is not None:
                _count(per_address, self._address, -1)
                if self._first:
                    _count(waiting, self._address, -1)
                self._address, self._first = None, False
            super().connection_lost(exc)

        def on_message_complete(self) -> None:
            self._disarm()
            if self._first and self._address is not None:
                _count(waiting, self._address, -1)
                self._first = False
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and not self.pipeline:
                self._arm()  # the next request has the same time to arrive

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            if self.cycle is None or not self.cycle.response_started:
                self.transport.write(late)
            self.transport.close()

    return Limited


def _count(counts: dict[str, int], address: str, change: int) -> None:
    """Add ``change`` to ``address``'s count, dropping it at zero."""
    left = counts.get(address, 0) + change
    if left > 0:
        counts[address] = left
    else:
        counts.pop(address, None)


@dataclass
class Served:
    """A running server: its URL, and ``stop``."""

    url: str
    server: _Server
    task: asyncio.Task[None]
    sock: socket.socket

    async def stop(self, wait: float = 3.0) -> None:
        """Stop accepting; requests still open (watches never end by themselves) are given
        the graceful period, then cut after ``wait`` seconds."""
        self.server.exit()
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
    clients: ClientLimits | None = None,
    **options: Any,
) -> Served:
    """Serve ``app`` on ``sock`` (bound by ``listen(host, …)``) and return once it accepts
    connections. The URL names ``host`` as given, so that it matches a certificate's name.

    ``clients``: what one client may hold (httptools' protocol, uvicorn's default here).
    ``options``: more ``uvicorn.Config`` keywords (``http="httptools"``…).
    """
    options = {**options, **tls_options(tls)}  # a TLS listener with a client CA sets its http
    if clients is not None:
        base = options.get("http", HttpToolsProtocol)
        if not isinstance(base, type):
            base = HttpToolsProtocol
        options["http"] = limited(base, clients)
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=grace,
        timeout_keep_alive=options.pop("timeout_keep_alive", KEEP_ALIVE),
        **options,
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
