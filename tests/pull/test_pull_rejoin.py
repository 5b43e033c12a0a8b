"""A new agent for a pull cluster that exists (its agent's state directory lost): a join
token made for the cluster's name joins it again; what runs there is kept, not redeployed,
and the new agent runs the cluster's copies from then on."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from shoal.model.kubernetes import Application, Cluster
from shoal.testing.wait import wait_for
from tests.pull.conftest import NS, Hub, Member, online
from tests.pull.test_pull_api_restart import scaled
from tests.pull.test_pull_reconnect import app_on, deployments, edge_running

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]


async def deployment_uid(member: Member, name: str) -> str:
    found = await member.kubectl("get", "deployment", name, "-n", NS)
    assert found is not None
    return str(found["metadata"]["uid"])


async def test_a_token_for_the_cluster_joins_a_new_agent(hub: Hub, members: Any) -> None:
    edge = await edge_running(hub, members, "web")
    uid = await deployment_uid(edge, "web")
    cluster_uid = (await hub.admin.get(Cluster, "edge", NS)).metadata.uid

    edge.kill()
    shutil.rmtree(edge.state_dir)  # the agent's credential and record are lost
    made = await hub.admin.request(
        "POST", f"/kubernetes/namespaces/{NS}/jointokens", body={"cluster": "edge"}
    )
    edge.start(made["token"])
    await wait_for(lambda: online(hub, "edge"), timeout=60)
    assert (await hub.admin.get(Cluster, "edge", NS)).metadata.uid == cluster_uid

    await scaled(hub, "web", 3)  # the new agent runs its copies
    await hub.admin.create(app_on("api", 1))

    async def applied() -> bool:
        return await deployments(edge) == {"web": 3, "api": 1}

    await wait_for(applied, timeout=60)
    assert await deployment_uid(edge, "web") == uid  # changed in place, never redeployed


async def test_a_revoked_agent_stops_and_a_new_token_joins_it_again(
    hub: Hub, members: Any
) -> None:
    edge = await edge_running(hub, members, "web")
    revoked = await hub.admin.request(
        "DELETE", f"/kubernetes/namespaces/{NS}/clusters/edge/credential"
    )
    assert revoked["generation"] == 1
    assert edge.process is not None
    process = edge.process

    async def stopped() -> bool:
        return process.poll() is not None

    await wait_for(stopped, timeout=60)  # retrying cannot help: it stops, saying why
    assert process.returncode != 0
    log = edge.log.read_text()
    assert "credential revoked" in log and "join-token create --cluster edge" in log
    assert not (edge.state_dir / "credential.json").exists()
    assert (edge.state_dir / "credential.revoked.json").exists()

    made = await hub.admin.request(
        "POST", f"/kubernetes/namespaces/{NS}/jointokens", body={"cluster": "edge"}
    )
    edge.start(made["token"])  # the same state directory: the token is used
    await wait_for(lambda: online(hub, "edge"), timeout=60)
    await hub.admin.delete(Application, "web", NS)

    async def removed() -> bool:
        return await deployments(edge) == {}

    await wait_for(removed, timeout=60)
