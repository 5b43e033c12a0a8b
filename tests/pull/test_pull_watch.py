"""A pull cluster's agent learns that a copy became ready from its objects' events on the
member cluster, not by looking again: with every periodic look pushed out of reach, the
copy's status still moves to ready when its Deployment does."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from shoal.agent.copies import CopyRunner
from shoal.model.base import Metadata, ResourceRef
from shoal.model.copies import Copy, CopyWork
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.pull.conftest import NS, Hub, member_api

pytestmark = pytest.mark.integration

NEVER = 3600.0  # seconds: no periodic look happens within the test


def copy_of(name: str, cluster: str, replicas: int) -> Copy:
    return Copy(
        metadata=Metadata(name=f"{name}:{cluster}", namespace=NS),
        spec=CopyWork(
            app_namespace=NS, app_name=name, app_uid=f"uid-{name}",
            cluster=ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name=cluster),
            kube_namespace=NS,
            manifest=[builders.deployment(name, "nginx:1", replicas=replicas)],
        ),
    )  # fmt: skip


async def test_a_copy_becomes_ready_on_its_objects_events(hub: Hub, sim: SimServer) -> None:
    # pods start half a second after they are made: the first apply sees it not ready yet
    sim.clusters.add_cluster("edge", 2, cpu="8", pod_start_delay=0.5)
    async with member_api(sim, "edge") as kube:
        runner = CopyRunner(hub.admin, kube, NS, "edge", poll=NEVER, fallback=NEVER)
        task = asyncio.create_task(runner.run())
        try:
            await hub.admin.create(copy_of("web", "edge", replicas=2))

            async def answered() -> Copy | None:
                copy = await hub.admin.get(Copy, "web:edge", NS)
                return copy if copy.status.generation == 1 else None

            first = await wait_for(answered, timeout=30)
            assert not first.status.ready  # applied, its pods not started yet

            async def ready() -> Copy | None:
                copy = await hub.admin.get(Copy, "web:edge", NS)
                return copy if copy.status.ready else None

            copy = await wait_for(ready, timeout=30)
            assert copy.status.ready_replicas == 2
            # the looks read the watch's cache, not the member's API
            assert runner.applier.members.cached_reads > 0
            assert runner.watches.events > 0
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
