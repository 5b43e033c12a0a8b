"""A Copy on a pull cluster that its application does not use (written for a move there
that the application left before the agent answered, as the chaos soak found): the hub
deletes it when the cluster is back, and the agent removes what it made."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.model.kubernetes import Application, ApplicationState
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.pull.conftest import NS, Hub, online, push_cluster
from tests.pull.test_pull_reconnect import deployments

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]

COPIES = f"/kubernetes/namespaces/{NS}/copies"


async def test_a_copy_its_application_left_is_pruned(
    hub: Hub, members: Any, sim: SimServer
) -> None:
    await push_cluster(hub, sim, "core", site="core")
    edge = await members("edge", site="edge")
    app = await hub.admin.create(Application.model_validate({
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"manifest": [builders.deployment("web", "nginx:1", replicas=1)],
                 "constraints": {"cluster": {"labels": ["site is core"]}}},
    }))  # fmt: skip

    async def running() -> bool:
        web = await hub.admin.get(Application, "web", NS)
        return web.status.state is ApplicationState.RUNNING

    await wait_for(running, timeout=60)
    edge.kill()  # the agent away, a Copy for it is written and left, as a move abandoned
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": NS, "name": "edge"}
    stray = {"api": "kubernetes", "kind": "Copy",
             "metadata": {"name": "web:edge", "finalizers": ["shoal.kube/copy"]},
             "spec": {"app_namespace": NS, "app_name": "web", "app_uid": app.metadata.uid,
                      "cluster": ref, "kube_namespace": NS, "generation": 1,
                      "manifest": app.spec.manifest}}  # fmt: skip
    await hub.admin.request("POST", COPIES, body=stray)

    async def offline() -> bool:
        return not await online(hub, "edge")

    await wait_for(offline, timeout=60)
    edge.start()  # back: the hub deletes the Copy, the agent removes what it applied

    async def pruned() -> bool:
        names = [c["metadata"]["name"] for c in (await hub.admin.request("GET", COPIES))["items"]]
        return names == [] and await deployments(edge) == {}

    await wait_for(pruned, timeout=60)
    assert (await hub.admin.get(Application, "web", NS)).status.running_on.name == "core"
