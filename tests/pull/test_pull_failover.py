"""A pull cluster whose agent goes away: OFFLINE within the lease, its share moves (never
below the surviving shares), and when the agent comes back the copies left there go."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterState
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.pull.conftest import LEASE, NS, Hub, Member, online

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]

PLACEMENT = {"clusters": 2, "spread_by": "location", "replicas": "divided",
             "fallback": ["tier is primary", "tier is backup"]}  # fmt: skip


async def ready_replicas(member: Member, name: str) -> int:
    live = await member.kubectl("get", "deployment", name, "-n", NS)
    return int(((live or {}).get("status") or {}).get("readyReplicas") or 0)


async def running_on(hub: Hub, name: str, clusters: set[str]) -> Application | None:
    app = await hub.admin.get(Application, name, NS)
    running = {p.cluster.name for p in app.status.placements
               if p.state is ApplicationState.RUNNING}  # fmt: skip
    return app if app.status.state is ApplicationState.RUNNING and running == clusters else None


async def test_a_lost_pull_cluster_fails_over_and_is_cleaned_when_back(
    hub: Hub, members: Any
) -> None:
    de1 = await members("de-1", location="DE", tier="primary")
    de2 = await members("de-2", location="DE", tier="backup")
    fr1 = await members("fr-1", location="FR", tier="primary")
    app = builders.app("web", namespace=NS, placement=PLACEMENT,
                    manifest=[builders.deployment("web", "nginx:1", replicas=4)])
    await hub.admin.create(app)
    await wait_for(lambda: running_on(hub, "web", {"de-1", "fr-1"}), timeout=60)
    assert await ready_replicas(de1, "web") == 2 and await ready_replicas(fr1, "web") == 2

    lowest = 4
    sampling = True

    async def sample() -> None:  # what the surviving clusters run, meanwhile
        nonlocal lowest
        while sampling:
            total = await ready_replicas(de2, "web") + await ready_replicas(fr1, "web")
            lowest = min(lowest, total)
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    de1.kill()
    stopped = time.monotonic()

    async def offline() -> float | None:
        state = (await hub.admin.get(Cluster, "de-1", NS)).status.state
        return time.monotonic() if state is ClusterState.OFFLINE else None

    went = await wait_for(offline, timeout=60)
    assert went - stopped < LEASE + 5.0, "OFFLINE within the lease (and a status write)"
    await wait_for(lambda: running_on(hub, "web", {"de-2", "fr-1"}), timeout=60)
    sampling = False
    await sampler
    assert await ready_replicas(de2, "web") == 2 and await ready_replicas(fr1, "web") == 2
    assert lowest >= 2, "never below the surviving share"
    # the copy the agent left running is still there while it is away
    assert await ready_replicas(de1, "web") == 2

    de1.start()  # its kept credential: no token
    await wait_for(lambda: online(hub, "de-1"), timeout=60)

    async def removed() -> bool:
        return await de1.kubectl("get", "deployment", "web", "-n", NS) is None

    await wait_for(removed, timeout=60)
    assert await ready_replicas(fr1, "web") == 2 and await ready_replicas(de2, "web") == 2
