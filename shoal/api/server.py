"""Run the API server inside an event loop (``shoal api``, ``shoal up``, tests)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from shoal.api.app import create_app
from shoal.api.auth import Protection, Security, protect
from shoal.api.auth.config import Limits
from shoal.machinery import outbound
from shoal.machinery.server import ClientLimits, Served, listen, serve
from shoal.model.validation import schemas
from shoal.store.base import Store
from shoal.store.factory import open_store

log = logging.getLogger(__name__)


@dataclass
class ApiServer:
    url: str
    store: Store
    served: Served
    own_store: bool
    protection: Protection | None = None

    @property
    def task(self) -> asyncio.Task[None]:
        return self.served.task

    async def stop(self) -> None:
        await self.served.stop()
        if self.protection is not None:
            await self.protection.stop()
        if self.own_store:
            await self.store.close()


async def start_api(
    store: Store | str = "sqlite://:memory:",
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    log_level: str = "warning",
    security: Security | None = None,
    kube_finalizer: bool = False,
) -> ApiServer:
    """Start the API on ``host:port`` (0: any free port) and return once it accepts requests.

    Without ``security`` the API is open (anonymous, always-allow): library use and tests.
    ``kube_finalizer``: see ``create_app``.
    """
    schemas.warm()  # before the first create, which would otherwise pay for it (once a process)
    outbound.policy()  # a broken SHOAL_OUTBOUND file stops the start, not a tenant's write
    own = isinstance(store, str)
    the_store = open_store(store) if isinstance(store, str) else store
    protection = protect(security, the_store) if security is not None else None
    if protection is not None:
        await protection.start()
    app = create_app(the_store, security=protection, kube_finalizer=kube_finalizer)
    tls = security.tls if security is not None else None
    limits = security.limits if security is not None else Limits()
    clients = ClientLimits(limits.request_timeout, limits.connections_per_client)
    served = await serve(
        app, listen(host, port), host, tls=tls, log_level=log_level, clients=clients
    )
    return ApiServer(served.url, the_store, served, own, protection)
