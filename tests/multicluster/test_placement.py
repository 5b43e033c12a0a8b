"""One application on several clusters: spread, division, duplication, overrides, deletion.

Every outcome is read back from the member clusters themselves.
"""

from __future__ import annotations

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.model.placement_spec import Placement
from shoal.testing import builders
from tests.conftest import ControlPlane
from tests.multicluster.conftest import NS, replicas_on, spread_app
from tests.util import until_gone, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EVEN = {"clusters": 2, "spread_by": "location", "replicas": "divided", "weights": "even"}


async def _running(client: ShoalClient, name: str) -> Application | None:
    app = await client.get(Application, name, NS)
    return app if app.status.state is ApplicationState.RUNNING else None


async def _run_dynamic(client: ShoalClient, replicas: int) -> None:
    """``dyn``: ``replicas`` pods of 500m on the primaries, divided by their room."""
    placement = {**EVEN, "weights": "dynamic", "fallback": ["tier is primary"]}
    app = spread_app("dyn", replicas, placement)
    container = app.spec.manifest[0]["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "500m"}}
    await client.create(app)
    await wait_for(lambda: _running(client, "dyn"), timeout=15, message="dyn RUNNING")


async def test_divided_evenly_over_two_locations(
    client: ShoalClient, kube: dict[str, KubeCluster], control_plane: ControlPlane
) -> None:
    await client.create(spread_app("web", 10, EVEN))
    app = await wait_for(lambda: _running(client, "web"), timeout=15, message="web RUNNING")

    live = await replicas_on(kube, "web")
    assert sorted(live.values()) == [(5, 5), (5, 5)]
    assert {name[:2] for name in live} == {"de", "fr"}  # one per location
    placements = app.status.placements
    shares = {p.cluster.name: (p.replicas, p.ready_replicas, p.state) for p in placements}
    assert shares == {name: (5, 5, ApplicationState.RUNNING) for name in live}
    assert app.status.running_on == app.status.placements[0].cluster  # Krake's one cluster

    # someone scales one copy by hand: its share is applied again
    other = app.status.placements[1].cluster.name
    live_copy = await kube[other].read(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}, NS
    )
    assert live_copy is not None
    live_copy["spec"]["replicas"] = 1
    await kube[other].request(
        "PUT", f"/apis/apps/v1/namespaces/{NS}/deployments/web", body=live_copy
    )

    async def repaired() -> bool:
        return (await replicas_on(kube, "web")).get(other) == (5, 5)

    await wait_for(repaired, timeout=15, message=f"the copy on {other} repaired")

    await client.delete(Application, "web", NS)

    await until_gone(client, Application, "web", NS, timeout=10)
    assert await replicas_on(kube, "web") == {}  # no copy left on any cluster


async def test_duplicated_runs_every_replica_on_each_cluster(
    client: ShoalClient, kube: dict[str, KubeCluster], control_plane: ControlPlane
) -> None:
    placement = {"clusters": 3, "replicas": "duplicated"}
    await client.create(spread_app("dup", 3, placement))
    await wait_for(lambda: _running(client, "dup"), timeout=15, message="dup RUNNING")
    live = await replicas_on(kube, "dup")
    assert len(live) == 3 and set(live.values()) == {(3, 3)}


@pytest.mark.parametrize("sizes", [{"de-1": "2", "fr-1": "6"}])
async def test_dynamic_weights_follow_free_capacity(
    client: ShoalClient, kube: dict[str, KubeCluster], control_plane: ControlPlane
) -> None:
    await _run_dynamic(client, 8)
    live = await replicas_on(kube, "dyn")
    # room for 500m pods: de-1 2 nodes x 2 cpu = 8 pods, fr-1 2 x 6 cpu = 24 pods: 1:3
    assert live == {"de-1": (2, 2), "fr-1": (6, 6)}


async def test_overrides_apply_to_the_clusters_they_select(
    client: ShoalClient, kube: dict[str, KubeCluster], control_plane: ControlPlane
) -> None:
    image = "eu.registry/web:1"
    merge = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}}
    placement = {
        **EVEN,
        "overrides": [
            {"clusters": "location is FR", "patch": {"kind": "Deployment", "name": "ov",
                                                     "merge": merge}}
        ],
    }
    await client.create(spread_app("ov", 4, placement))
    await wait_for(lambda: _running(client, "ov"), timeout=15, message="ov RUNNING")
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ov"}}
    images = {}
    for name, api in kube.items():
        live = await api.read(ref, NS)
        if live is not None:
            images[name[:2]] = live["spec"]["template"]["spec"]["containers"][0]["image"]
    assert images == {"de": "nginx:1", "fr": image}


@pytest.mark.parametrize("sizes", [{"de-1": "4", "fr-1": "4"}])
async def test_dynamic_weights_leave_out_what_running_pods_request(
    client: ShoalClient, kube: dict[str, KubeCluster], control_plane: ControlPlane
) -> None:
    filler = builders.deployment("filler", "busy:1", requests={"cpu": "2"}, replicas=2)
    await kube["fr-1"].apply(filler, NS)  # half of fr-1's 8 cpu, run by someone else

    async def observed() -> bool:
        cluster = await client.get(Cluster, "fr-1", NS)
        totals = cluster.status.node_summary[0] if cluster.status.node_summary else {}
        return (totals.get("requested") or {}).get("cpu") == 4.0

    await wait_for(observed, timeout=15, message="fr-1's requested cpu observed")
    await _run_dynamic(client, 6)
    # room for 500m pods: de-1 8 cpu = 16 pods, fr-1 8 - 4 requested = 8 pods: 2:1
    assert await replicas_on(kube, "dyn") == {"de-1": (4, 4), "fr-1": (2, 2)}


async def test_one_cluster_to_several_and_back_leaves_no_copy_behind(
    client: ShoalClient, kube: dict[str, KubeCluster], control_plane: ControlPlane
) -> None:
    app = spread_app("move", 4, EVEN)
    app.spec.placement = None
    app.spec.constraints.cluster.labels = ["tier is backup", "location is DE"]
    await client.create(app)
    await wait_for(lambda: _running(client, "move"), timeout=15, message="move on de-2")
    assert await replicas_on(kube, "move") == {"de-2": (4, 4)}

    async def update(**spec: object) -> None:
        stored = await client.get(Application, "move", NS)
        await client.update(stored.model_copy(
            update={"spec": stored.spec.model_copy(update=spec)}))  # fmt: skip

    constraints = app.spec.constraints.model_copy(deep=True)
    constraints.cluster.labels = ["tier is primary"]
    await update(placement=Placement.model_validate(EVEN), constraints=constraints)

    async def spread() -> bool:
        return await replicas_on(kube, "move") == {"de-1": (2, 2), "fr-1": (2, 2)}

    await wait_for(spread, timeout=15, message="move on de-1 and fr-1 only")
    constraints = constraints.model_copy(deep=True)
    constraints.cluster.labels = ["location is FR", "tier is backup"]
    await update(placement=None, constraints=constraints)

    async def single() -> bool:
        return await replicas_on(kube, "move") == {"fr-2": (4, 4)}

    await wait_for(single, timeout=15, message="move on fr-2 only")
    final = await wait_for(lambda: _running(client, "move"), timeout=15, message="RUNNING")
    assert final.status.copies == [] and final.status.placements == []
