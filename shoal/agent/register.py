"""Agents register themselves: their URL goes into their Cluster's ``status.agent``.

The fleet scheduler finds agents through the API (a watch on clusters), not
through a static list. The registration is kept: a status written by someone
else without the URL (an observer's stale copy) is corrected on the next
round, and a stopped agent takes its URL away.
"""

from __future__ import annotations

import asyncio
import logging

from shoal.client.rest import ApiError, Conflict, ShoalClient, Unreachable
from shoal.model.kubernetes import Cluster

log = logging.getLogger(__name__)
KEEP_EVERY = 10.0  # seconds between two checks that the registration is still there


async def set_agent_url(client: ShoalClient, cluster: str, namespace: str, url: str) -> bool:
    """Write ``url`` (empty: unregister) into the cluster's status; whether it changed."""
    for _ in range(20):
        found = await client.get(Cluster, cluster, namespace)
        if found.status.agent == url:
            return False
        found.status.agent = url
        try:
            await client.update_status(found)
        except Conflict:  # someone wrote the status meanwhile: read it again
            continue
        return True
    raise RuntimeError(f"cluster {namespace}/{cluster}: status kept changing; not registered")


async def keep_registered(client: ShoalClient, cluster: str, namespace: str, url: str,
                          every: float = KEEP_EVERY) -> None:
    """Register, then check every ``every`` s that the URL is still there; until cancelled."""
    while True:
        try:
            if await set_agent_url(client, cluster, namespace, url):
                log.info("agent of cluster %s/%s registered at %s", namespace, cluster, url)
        except (ApiError, Unreachable, OSError, RuntimeError) as error:  # the API is away
            log.warning("registering the agent of %s/%s: %s", namespace, cluster, error)
        except Exception:  # a keeper that stopped would leave a registered-again cluster bare
            log.exception("registering the agent of %s/%s failed; next round", namespace, cluster)
        await asyncio.sleep(every)
