"""Applications on pull clusters: the hub writes each copy as a ``Copy``, the cluster's
agent (``shoal join``, a real process) runs it with the member's own credentials. What
runs is read back through the member's own API, and the member's request log shows who
reached it."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from shoal.model.copies import Copy, copy_name
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.pull.conftest import NS, Hub

pytestmark = pytest.mark.integration

PID = re.compile(r"\(pid (\d+)\)")


def app_on(name: str, cluster: str, replicas: int = 2) -> Application:
    return builders.app(name, [f"site is {cluster}"], namespace=NS,
                     manifest=[builders.deployment(name, "nginx:1", replicas=replicas)])


async def running(hub: Hub, name: str) -> Application | None:
    app = await hub.admin.get(Application, name, NS)
    return app if app.status.state is ApplicationState.RUNNING else None


async def test_an_application_runs_on_a_joined_cluster_the_hub_never_dials(
    hub: Hub, members: Any
) -> None:
    edge = await members("edge-7", site="edge-7")
    cluster = await hub.admin.get(Cluster, "edge-7", NS)
    assert cluster.spec.mode == "pull" and cluster.spec.kubeconfig is None

    await hub.admin.create(app_on("web", "edge-7", replicas=3))
    app = await wait_for(lambda: running(hub, "web"), timeout=60)
    assert app.status.running_on is not None and app.status.running_on.name == "edge-7"
    assert app.status.last_applied_manifest  # Krake's projection, as for a push cluster

    # the Deployment runs there, read through the member's own API
    live = await edge.kubectl("get", "deployment", "web", "-n", NS)
    assert live is not None and live["spec"]["replicas"] == 3
    assert live["status"].get("readyReplicas") == 3

    # its Copy: readable by the admin, answered by the agent
    copy = await hub.admin.get(Copy, copy_name("web", "edge-7"), NS)
    assert copy.spec.cluster.name == "edge-7"
    assert copy.status.generation == copy.spec.generation and copy.status.ready

    # no hub process ever reached the member cluster: only the agent did
    callers = {int(m.group(1)) for r in await edge.requests()
               if (m := PID.search(str(r["user_agent"])))}  # fmt: skip
    assert callers == {edge.pid}, callers
    assert os.getpid() not in callers

    # deleting it removes its objects there, then its Copy
    await hub.admin.delete(Application, "web", NS)

    async def gone() -> bool:
        apps = await hub.admin.list(Application, NS)
        return not apps.items and await edge.kubectl("get", "deployment", "web", "-n", NS) is None

    await wait_for(gone, timeout=60)
    assert (await hub.admin.list(Copy, NS)).items == []


async def test_a_deleted_pull_clusters_copies_go_without_its_agent(
    hub: Hub, members: Any
) -> None:
    edge = await members("edge-9", site="edge-9")
    await hub.admin.create(app_on("api", "edge-9", replicas=1))
    await wait_for(lambda: running(hub, "api"), timeout=60)
    edge.kill()  # gone for good
    await hub.admin.request("DELETE", f"/kubernetes/namespaces/{NS}/clusters/edge-9",
                            params={"force": "true"})  # fmt: skip

    async def no_copies() -> bool:
        return not (await hub.admin.list(Copy, NS)).items

    await wait_for(no_copies, timeout=60)
    await hub.admin.delete(Application, "api", NS)

    async def deleted() -> bool:
        return not (await hub.admin.list(Application, NS)).items

    await wait_for(deleted, timeout=60)  # no agent was waited for
