"""A placement on fewer clusters than it asked for says so, and fills its slot again.

Four sim clusters (de-1, de-2, fr-1, fr-2; the ``-1`` ones primary). What runs
is read from the member clusters; what the application says, from its status
and its events.
"""

from __future__ import annotations

from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import DEGRADED, Application, ApplicationState, Cluster
from shoal.model.placement import room
from shoal.sim.server import SimServer
from tests.conftest import ControlPlane
from tests.events.test_scenario import until
from tests.multicluster.conftest import NS, replicas_on, spread_app
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def _running_short(client: ShoalClient, name: str, message: str) -> Application | None:
    """The application, once RUNNING with a Degraded condition saying ``message``."""
    app = await client.get(Application, name, NS)
    found = [c for c in app.status.conditions if c.type == DEGRADED]
    if app.status.state is ApplicationState.RUNNING and found and found[0].message == message:
        return app
    return None


@pytest.mark.parametrize(
    ("placement", "message", "copies"),
    [
        ({"clusters": 5}, "on 4 of 5 clusters asked for: 4/4 clusters available", 4),
        (
            {"clusters": 2, "spread_by": "regoin", "replicas": "divided"},
            "on 1 of 2 clusters asked for: no cluster has the spread_by label 'regoin'",
            1,
        ),
    ],
    ids=["five-of-four", "spread-by-typo"],
)
async def test_a_short_placement_runs_and_says_why(
    client: ShoalClient,
    kube: dict[str, KubeCluster],
    control_plane: ControlPlane,
    placement: dict[str, Any],
    message: str,
    copies: int,
) -> None:
    await client.create(spread_app("web", 4, placement))
    app = await wait_for(
        lambda: _running_short(client, "web", message), timeout=30, message="web RUNNING, short"
    )
    condition = app.status.conditions[0]
    assert (condition.status, condition.reason) == ("True", "PlacementShort")
    assert condition.since is not None
    assert len(await replicas_on(kube, "web")) == copies  # it runs where it could
    assert app.status.scheduling is not None and app.status.scheduling["short"] == message
    event = await until(client, "Application", "web", "PlacementShort")
    assert (event.type, event.message) == ("Warning", message)

    # on one cluster, without a placement, nothing runs short any more
    app.spec.placement = None
    await client.update(app)
    await wait_for(lambda: _not_short(client), timeout=15, message="the condition cleared")


async def _placed(client: ShoalClient, name: str, shares: dict[str, int | None]) -> bool:
    app = await client.get(Application, name, NS)
    now = {p.cluster.name: p.replicas for p in app.status.placements}
    running = all(p.state is ApplicationState.RUNNING for p in app.status.placements)
    return now == shares and running and app.status.state is ApplicationState.RUNNING


@pytest.mark.parametrize("mode", ["divided", "duplicated"])
async def test_a_slot_left_empty_is_filled_again_when_its_cluster_is_back(
    client: ShoalClient,
    sim: SimServer,
    kube: dict[str, KubeCluster],
    control_plane: ControlPlane,
    mode: str,
) -> None:
    """Only the primaries fit: when de-1 goes away no cluster can take its slot; fr-1
    carries its share (divided) or runs alone (duplicated), saying so; when de-1 is
    back, its slot is filled again by itself, in both modes alike."""
    placement = {"clusters": 2, "spread_by": "location", "replicas": mode}
    constraints = {"cluster": {"labels": ["tier is primary"]}}
    await client.create(spread_app("web", 4, placement, constraints=constraints))
    both = {"de-1": 2, "fr-1": 2} if mode == "divided" else {"de-1": None, "fr-1": None}
    await wait_for(lambda: _placed(client, "web", both), timeout=20, message="web on both")

    sim.clusters.set_unreachable("de-1")
    alone = {"fr-1": 4} if mode == "divided" else {"fr-1": None}
    await wait_for(lambda: _placed(client, "web", alone), timeout=15, message="web on fr-1")
    short = await wait_for(
        lambda: _short(client), timeout=10, message="a Degraded condition while on fr-1"
    )
    assert short.startswith("on 1 of 2 clusters asked for")
    reachable = {name: api for name, api in kube.items() if name != "de-1"}
    assert await replicas_on(reachable, "web") == {"fr-1": (4, 4)}

    sim.clusters.set_unreachable("de-1", False)
    await wait_for(lambda: _placed(client, "web", both), timeout=20, message="de-1 filled again")
    live = {name: (share or 4, share or 4) for name, share in both.items()}
    await wait_for(lambda: _live(kube, live), timeout=15, message="both copies running")
    await wait_for(lambda: _not_short(client), timeout=10, message="the condition cleared")
    complete = await until(client, "Application", "web", "PlacementComplete")
    assert complete.message == "Placed on every cluster asked for"


async def _short(client: ShoalClient) -> str | None:
    app = await client.get(Application, "web", NS)
    found = [c.message for c in app.status.conditions if c.type == DEGRADED]
    return found[0] if found else None


async def _not_short(client: ShoalClient) -> bool:
    return await _short(client) is None


async def _live(kube: dict[str, KubeCluster], expected: dict[str, tuple[int, int]]) -> bool:
    return await replicas_on(kube, "web") == expected


@pytest.fixture
def sizes() -> dict[str, str]:
    """fr-1's nodes have 2 cpus: it holds two pods of 1.5 cpus, one a node."""
    return {"fr-1": "2"}


async def test_a_share_no_cluster_can_take_keeps_the_application_where_it_runs(
    client: ShoalClient,
    sim: SimServer,
    kube: dict[str, KubeCluster],
    control_plane: ControlPlane,
) -> None:
    """de-1 goes away and fr-1, the only other primary, has no room for its share: the
    application keeps running as it was and says what is missing."""
    placement = {"clusters": 2, "spread_by": "location", "replicas": "divided"}
    constraints = {"cluster": {"labels": ["tier is primary"]}}
    app = spread_app("web", 4, placement, constraints=constraints)
    container = app.spec.manifest[0]["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "1500m"}}
    await client.create(app)
    both = {"de-1": 2, "fr-1": 2}
    await wait_for(lambda: _placed(client, "web", both), timeout=20, message="web on both")

    async def fr1_full() -> bool:
        """The observer has counted the pods on fr-1 (it sums them every 5 s at most)."""
        fr1 = await client.get(Cluster, "fr-1", NS)
        return room(fr1.status.node_summary, {"cpu": 1500, "pods": 1}) == 0

    await wait_for(fr1_full, timeout=15, message="fr-1's room counted")
    sim.clusters.set_unreachable("de-1")
    short = await wait_for(lambda: _short(client), timeout=20, message="a Degraded condition")
    assert short.startswith("kept where it runs: 2 of 4 replicas fit on no cluster")
    event = await until(client, "Application", "web", "PlacementShort")
    assert event.message == short
    reachable = {name: api for name, api in kube.items() if name != "de-1"}
    assert await replicas_on(reachable, "web") == {"fr-1": (2, 2)}  # fr-1 keeps its own
