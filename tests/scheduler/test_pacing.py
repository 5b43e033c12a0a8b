"""Migration pacing with the kube controller moving applications between sim clusters.

An application moves for a better cluster at most once per
``min_migration_interval``, measured from when it settled where it is (RUNNING
there), not from the binding; the first reaction to a metric change of an
application that settled longer ago is immediate.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterSpec, MetricRef
from shoal.sim.server import SimServer
from shoal.testing.shipped import Callers
from shoal.testing.sim import running_sim
from tests.scheduler import helpers as h
from tests.util import wait_for

pytestmark = [pytest.mark.integration]

# Long enough that a loaded machine's reaction (the first move, the check right after it)
# stays well inside it: the test asserts on both sides of the interval.
INTERVAL = 8.0


def _cluster(sim: SimServer, name: str) -> Cluster:
    return Cluster(
        metadata=Metadata(name=name, namespace=h.NS),
        spec=ClusterSpec(
            kubeconfig=sim.kubeconfig(name), metrics=[MetricRef(name=f"m-{name}", weight=1)]
        ),
    )


async def _running_on(client: ShoalClient, name: str, cluster: str) -> Application | None:
    app = await h.get_app(client, name)
    status = app.status
    on = status.running_on.name if status.running_on else None
    return app if status.state is ApplicationState.RUNNING and on == cluster else None


def _scheduled(app: Application) -> datetime:
    assert app.status.scheduled is not None
    return app.status.scheduled


async def test_one_move_per_interval_from_the_completed_move(
    api: ApiServer, client: ShoalClient, client_of: Callers
) -> None:
    config = h.fast_config(min_migration_interval=INTERVAL, metrics_refresh=0.1)
    async with running_sim(clusters=["a", "b"], nodes=1, pod_start_delay=0.05) as sim:
        await h.static_metrics(client, {"m-a": 0.9, "m-b": 0.1})
        for name in ("a", "b"):
            await h.register(client, _cluster(sim, name))
        async with h.stack(client_of, config) as sch:
            handler = sch.apps_handler
            await client.create(h.app("web"))
            placed = await wait_for(
                lambda: _running_on(client, "web", "a"), timeout=15, message="RUNNING on a"
            )
            # Settled longer ago than the interval: the first reaction is immediate.
            await wait_for(
                lambda: handler.migration_wait(placed) == 0, timeout=INTERVAL * 2, message="due"
            )
            await h.set_static(client, {"m-a": 0.1, "m-b": 0.9})
            changed = datetime.now().astimezone()
            first = await wait_for(
                lambda: _running_on(client, "web", "b"), timeout=15, message="moved to b"
            )
            assert (_scheduled(first) - changed).total_seconds() < INTERVAL  # not held
            # the scheduler sees the move complete (after its binding) from its own watch
            await wait_for(
                lambda: handler.settled.get((h.NS, "web"), _scheduled(first)) > _scheduled(first),
                timeout=15,
                message="the scheduler saw the move complete",
            )
            settled = handler.settled[(h.NS, "web")]

            # A second change right away is held until an interval after the completed move.
            await h.set_static(client, {"m-a": 0.9, "m-b": 0.1})
            assert handler.migration_wait(first) > 0
            second = await wait_for(
                lambda: _running_on(client, "web", "a"), timeout=INTERVAL * 4, message="back"
            )
            assert (_scheduled(second) - settled).total_seconds() >= INTERVAL


async def test_no_pacing_for_a_spec_update_or_a_cluster_that_no_longer_fits(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.static_metrics(client, {"m-a": 0.9, "m-b": 0.1})
    for name in ("a", "b"):
        cluster = h.cluster(name, labels={"zone": "x"}, metrics={f"m-{name}": 1})
        await h.register(client, cluster)
    config = h.fast_config(min_migration_interval=600, metrics_refresh=0.1)
    async with h.running(api.url, config):
        await client.create(h.app("web", labels=["zone is x"]))
        assert await h.wait_bound(client, "web") == "a"
        await h.set_static(client, {"m-a": 0.1, "m-b": 0.9})  # held: b wins, but for 600 s
        # Its cluster no longer fits: it moves at once, paced or not.
        a = await client.get(Cluster, "a", h.NS)
        a.metadata.labels["zone"] = "y"
        await client.update(a)
        assert await h.wait_bound(client, "web", "b", timeout=5) == "b"
        # A spec update is rescheduled at once too: to a, the better cluster again.
        await h.set_static(client, {"m-a": 0.9, "m-b": 0.1})
        a = await client.get(Cluster, "a", h.NS)
        a.metadata.labels["zone"] = "x"
        await client.update(a)
        app = await h.get_app(client, "web")
        app.metadata.labels["touched"] = "yes"
        app.spec.constraints.cluster.labels = ["zone in (x)"]
        await client.update(app)
        assert await h.wait_bound(client, "web", "a", timeout=5) == "a"
