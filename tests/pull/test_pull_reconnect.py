"""A pull cluster's agent killed while its copies change (deleted, new, changed): once it
is back the member cluster holds exactly what the hub says, nothing more."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.client.rest import ApiError, Unreachable
from shoal.model.kubernetes import Application, ApplicationState
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.pull.conftest import NS, Hub, Member, online

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]


def app_on(name: str, replicas: int) -> Application:
    return builders.app(name, ["site is edge"], namespace=NS,
                     manifest=[builders.deployment(name, "nginx:1", replicas=replicas)])


async def deployments(member: Member) -> dict[str, int]:
    """Each Deployment on the member cluster and its replicas, read through its own API."""
    listed = await member.kubectl("get", "deployments", "-n", NS)
    return {d["metadata"]["name"]: d["spec"]["replicas"] for d in (listed or {}).get("items", [])}


async def settled(hub: Hub, wanted: dict[str, int]) -> bool:
    try:
        apps = {a.metadata.name: a for a in (await hub.admin.list(Application, NS)).items}
    except (ApiError, Unreachable):
        return False
    return set(apps) == set(wanted) and all(
        a.status.state is ApplicationState.RUNNING for a in apps.values()
    )


async def edge_running(hub: Hub, members: Any, name: str) -> Member:
    """The pull member ``edge`` (site edge) running application ``name``, one replica."""
    edge: Member = await members("edge", site="edge")
    await hub.admin.create(app_on(name, 1))
    await wait_for(lambda: settled(hub, {name: 1}), timeout=60)
    return edge


async def test_the_member_holds_what_the_hub_says_after_cuts(hub: Hub, members: Any) -> None:
    edge = await members("edge", site="edge")
    for name in ("a1", "a2"):
        await hub.admin.create(app_on(name, 1))
    await wait_for(lambda: settled(hub, {"a1": 1, "a2": 1}), timeout=60)
    assert await deployments(edge) == {"a1": 1, "a2": 1}

    edge.kill()  # the copies change while the agent is away...
    await hub.admin.delete(Application, "a1", NS)
    await hub.admin.create(app_on("a3", 1))
    a2 = await hub.admin.get(Application, "a2", NS)
    a2.spec.manifest = [builders.deployment("a2", "nginx:1", replicas=3)]
    await hub.admin.update(a2)
    edge.start()  # it lists its copies again: what changed meanwhile is done
    await wait_for(lambda: online(hub, "edge"), timeout=60)
    await hub.admin.create(app_on("a4", 2))
    edge.kill()  # cut again while a copy is new
    await hub.admin.create(app_on("a5", 1))
    edge.start()

    wanted = {"a2": 3, "a3": 1, "a4": 2, "a5": 1}
    await wait_for(lambda: settled(hub, wanted), timeout=90)

    async def exactly() -> bool:
        return await deployments(edge) == wanted

    await wait_for(exactly, timeout=60)


async def test_what_a_copy_gone_meanwhile_left_is_pruned_on_connect(
    hub: Hub, members: Any
) -> None:
    edge = await edge_running(hub, members, "old")
    edge.kill()
    # its Copy goes without the agent (as when the hub drops a cluster's copies), and
    # its application with it
    path = f"/kubernetes/namespaces/{NS}/copies/old:edge"
    await hub.admin.request("PUT", f"{path}/finalizers", body={"metadata": {"finalizers": []}})
    await hub.admin.delete(Application, "old", NS)
    await wait_for(lambda: settled(hub, {}), timeout=60)
    assert await deployments(edge) == {"old": 1}  # left behind on the member

    edge.start()

    async def pruned() -> bool:
        return await deployments(edge) == {}

    await wait_for(pruned, timeout=60)
