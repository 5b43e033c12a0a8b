"""A cluster moved from pull to push mode and back, its applications running throughout:
nothing is deployed again (the member's objects keep their uids), and each side takes the
copies over from what the application's status recorded."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.client.rest import NotFound
from shoal.model.copies import Copy, copy_name
from shoal.model.kubernetes import Application, Cluster, ClusterState
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.pull.conftest import NS, Hub, Member, online
from tests.pull.test_pull_copies import app_on, running

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]


async def live(member: Member) -> tuple[str, int, int]:
    found = await member.kubectl("get", "deployment", "web", "-n", NS)
    assert found is not None
    ready = int((found.get("status") or {}).get("readyReplicas") or 0)
    return found["metadata"]["uid"], found["spec"]["replicas"], ready


async def scaled(hub: Hub, member: Member, replicas: int, uid: str) -> None:
    app = await hub.admin.get(Application, "web", NS)
    app.spec.manifest = [builders.deployment("web", "nginx:1", replicas=replicas)]
    await hub.admin.update(app)

    async def there() -> bool:
        return await live(member) == (uid, replicas, replicas)

    await wait_for(there, timeout=60)
    await wait_for(lambda: running(hub, "web"), timeout=60)


async def test_a_cluster_moves_from_pull_to_push_and_back(hub: Hub, members: Any) -> None:
    edge = await members("edge", site="edge")
    await hub.admin.create(app_on("web", "edge", replicas=2))
    await wait_for(lambda: running(hub, "web"), timeout=60)
    uid, _, _ = await live(edge)

    # to push: the hub is given the kubeconfig, the agent stops
    edge.kill()
    cluster = await hub.admin.get(Cluster, "edge", NS)
    cluster.spec.mode = "push"
    cluster.spec.kubeconfig = edge.sim.kubeconfig("edge")
    await hub.admin.update(cluster)

    async def no_copy() -> bool:
        return not (await hub.admin.list(Copy, NS)).items

    await wait_for(no_copy, timeout=60)
    assert await live(edge) == (uid, 2, 2)  # still running, not removed
    await scaled(hub, edge, 3, uid)  # the hub's applier runs it now

    # back to pull: no kubeconfig, the agent resumes with its kept credential
    cluster = await hub.admin.get(Cluster, "edge", NS)
    cluster.spec.mode = "pull"
    cluster.spec.kubeconfig = None
    await hub.admin.update(cluster)
    edge.start()
    await wait_for(lambda: online(hub, "edge"), timeout=60)

    async def answered() -> bool:
        try:  # written when the hub sees the cluster answer in pull mode
            copy = await hub.admin.get(Copy, copy_name("web", "edge"), NS)
        except NotFound:
            return False
        return copy.status.generation == copy.spec.generation and copy.status.ready

    await wait_for(answered, timeout=60)
    assert await live(edge) == (uid, 3, 3)
    await scaled(hub, edge, 1, uid)  # the agent runs it again
    cluster = await hub.admin.get(Cluster, "edge", NS)
    assert cluster.status.state is ClusterState.ONLINE and cluster.spec.kubeconfig is None
