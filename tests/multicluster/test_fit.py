"""Pods bigger than any node are placed nowhere: the application waits, PENDING, saying why.

Four sim clusters of two 8-cpu nodes each (16 cpus a cluster, 64 in all): a pod of
30 cpus fits none of their nodes. What runs is read from the member clusters.
"""

from __future__ import annotations

from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.events.recorder import KIND_LABEL, NAME_LABEL
from shoal.model.events import Event
from shoal.model.kubernetes import Application, ApplicationState
from tests.conftest import ControlPlane
from tests.multicluster.conftest import NS, replicas_on, spread_app
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REASON = "it requests cpu 30, the largest node has cpu 8 left"


def big(name: str, replicas: int, placement: dict[str, Any] | None, cpu: str) -> Application:
    app = spread_app(name, replicas, placement or {})
    if placement is None:
        app.spec.placement = None
    container = app.spec.manifest[0]["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": cpu}}
    return app


async def _pending_with_reason(client: ShoalClient, name: str) -> Application | None:
    app = await client.get(Application, name, NS)
    reason = app.status.reason
    if app.status.state is ApplicationState.PENDING and reason and REASON in reason.message:
        return app
    return None


@pytest.mark.parametrize(
    "placement",
    [None, {"clusters": 2, "spread_by": "location", "replicas": "divided"}],
    ids=["one-cluster", "divided"],
)
async def test_pods_bigger_than_any_node_are_placed_nowhere(
    client: ShoalClient,
    kube: dict[str, KubeCluster],
    control_plane: ControlPlane,
    placement: dict[str, Any] | None,
) -> None:
    # a small application first: the clusters are observed and take what fits
    await client.create(big("small", 2, placement, "1"))

    async def small_running() -> bool:
        app = await client.get(Application, "small", NS)
        return app.status.state is ApplicationState.RUNNING

    await wait_for(small_running, timeout=20, message="small RUNNING")

    await client.create(big("huge", 2, placement, "30"))
    app = await wait_for(
        lambda: _pending_with_reason(client, "huge"), timeout=15, message="huge PENDING"
    )
    assert app.status.reason is not None
    assert app.status.reason.message.startswith("0/4 clusters available: 4 no node has room")
    assert app.status.scheduled_to is None and app.status.placements == []
    assert await replicas_on(kube, "huge") == {}  # nothing on any member cluster
    assert (await replicas_on(kube, "small")) != {}

    selector = f"{KIND_LABEL}=Application,{NAME_LABEL}=huge"

    async def told() -> bool:
        events = (await client.list(Event, NS, label_selector=selector)).items
        return any(e.reason == "Unschedulable" and REASON in e.message for e in events)

    await wait_for(told, timeout=10, message="an Unschedulable event saying why")
    # the dry run and the scheduler give the same reason
    body = big("huge", 2, placement, "30").model_dump(mode="json", exclude_none=True)
    answer = await client.request("POST", f"/scheduling/namespaces/{NS}/dryrun", body=body)
    assert REASON in answer["summary"]
