"""Run a controller only while holding a lease: one active replica, the others on standby.

A term ends when the lease is lost, and a controller's ``stop()`` closes its
queues and clients, so a controller is not reused across terms: each term
builds a fresh one from a factory, starting from a clean list-then-watch.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable

from shoal.client.rest import ShoalClient
from shoal.controllers.base import Controller
from shoal.controllers.leader import LeaderElection

log = logging.getLogger(__name__)


def default_identity() -> str:
    """``hostname-pid``: unique per process, readable in ``shoal core lease get``."""
    return f"{socket.gethostname()}-{os.getpid()}"


async def run_elected(
    factory: Callable[[], Controller],
    client: ShoalClient,
    lease: str,
    identity: str | None = None,
    duration: float = 15.0,
    *,
    election: LeaderElection | None = None,
) -> None:
    """Campaign for ``lease`` forever; during each term run a new ``factory()`` controller.

    The controller runs as the elector's ``on_started_leading`` task, so it is
    cancelled (and, through ``Controller.run``, stopped) as soon as the term
    ends; cancelling this coroutine releases the lease for a standby. Give the
    elector a ``client`` of its own, so renewals do not queue behind the
    controller's requests. ``election`` replaces the default elector (tests).
    """
    elector = election or LeaderElection(
        client, lease, identity or default_identity(), duration=duration
    )
    terms = 0

    async def lead() -> None:
        nonlocal terms
        terms += 1
        controller = factory()
        log.info(
            "%s: term %d of %s, starting %s",
            elector.identity,
            terms,
            lease,
            type(controller).__name__,
        )
        await controller.run()

    await elector.run(lead)
