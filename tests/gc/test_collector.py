"""The garbage collector against the in-process API (no clusters needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from shoal.client.rest import ShoalClient
from shoal.gc.controller import FINALIZER, GarbageCollector
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, Cluster, ClusterSpec
from shoal.testing.builders import KUBECONFIG
from shoal.testing.shipped import Callers
from tests.kube.conftest import NS, application
from tests.util import gone, started, until_gone, wait_for


@pytest.fixture
async def gc(client: ShoalClient, client_of: Callers) -> AsyncIterator[GarbageCollector]:
    collector = GarbageCollector(client_of("garbage-collector"), kinds=(Application, Cluster))
    async with started(collector):
        yield collector


async def test_cascade_deletes_dependents_first(
    client: ShoalClient, gc: GarbageCollector
) -> None:
    parent = await client.create(application("parent"))
    child = application("child")
    child.metadata.owners = [parent.ref()]
    await client.create(child)

    async def guarded() -> bool:
        return FINALIZER in (await client.get(Application, "parent", NS)).metadata.finalizers

    await wait_for(guarded, message="cascade finalizer on the owner")
    await client.delete(Application, "parent", NS)

    async def both_gone() -> bool:
        parent_there = not await gone(client, Application, "parent", NS)
        child_there = not await gone(client, Application, "child", NS)
        if parent_there is False:
            assert not child_there, "owner removed before its dependent"
        return not parent_there and not child_there

    await wait_for(both_gone, message="owner and dependent removed")


async def test_cluster_deletion_keeps_applications(
    client: ShoalClient, gc: GarbageCollector
) -> None:
    cluster = await client.create(
        Cluster(
            metadata=Metadata(name="c1", namespace=NS), spec=ClusterSpec(kubeconfig=KUBECONFIG)
        )
    )
    app = application("tenant")
    app.metadata.owners = [cluster.ref()]
    await client.create(app)
    await client.delete(Cluster, "c1", NS)
    await until_gone(client, Cluster, "c1", NS)
    remaining = await client.get(Application, "tenant", NS)
    assert remaining.metadata.deleted is None
