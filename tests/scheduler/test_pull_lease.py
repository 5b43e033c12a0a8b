"""The scheduler treats a pull cluster whose lease lapsed as an unreachable push cluster:
nothing new is placed there, and what was placed there moves off. The pull cluster joins
with a token on the secured API; its agent's status keeper (over the cluster's own
credential, reading a ``shoal sim`` cluster) and the observer (which times the lease) are
the real ones."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from shoal.agent.agent import connect
from shoal.agent.pull import StatusKeeper
from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.constraints import MetricRef
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.observer.controller import ClusterObserver
from shoal.testing import shipped
from shoal.testing.sim import running_sim
from shoal.testing.wait import wait_for
from tests.scheduler import helpers as h


async def join(client: ShoalClient, name: str, labels: dict[str, str]) -> str:
    """Join ``name`` with a fresh token; the cluster's own credential."""
    made = await client.request("POST", f"/kubernetes/namespaces/{h.NS}/jointokens", body={})
    body = {"token": made["token"], "name": name, "labels": labels}
    async with ShoalClient(client.url, token="", ssl_context=None) as anonymous:
        answer = await anonymous.request("POST", "/kubernetes/join", body=body)
    return str(answer["credential"])


@contextlib.asynccontextmanager
async def agent(url: str, credential: str, kubeconfig: dict[str, object],
                name: str) -> AsyncIterator[StatusKeeper]:  # fmt: skip
    kube = await connect(kubeconfig, 5.0)
    client = ShoalClient(url, token=credential, ssl_context=None)
    keeper = StatusKeeper(client, kube, h.NS, name, "test", every=0.1)
    task = asyncio.create_task(keeper.run())
    try:
        yield keeper
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
        await kube.api.close()


async def state_is(client: ShoalClient, name: str, state: ClusterState) -> bool:
    return (await client.get(Cluster, name, h.NS)).status.state is state


async def test_a_lapsed_pull_cluster_takes_nothing_and_loses_what_it_had(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.static_metrics(client, {"m-a": 0.9, "m-b": 0.1})
    credential = await join(client, "edge", {"location": "DE"})
    edge = await client.get(Cluster, "edge", h.NS)
    edge.spec.metrics = [MetricRef(name="m-a", weight=1)]  # the better cluster, while there
    await client.update(edge)
    async with (
        running_sim(clusters=["edge", "b"], nodes=1) as sim,
        shipped.client(api.url, "cluster-observer") as watcher,
    ):
        b = h.cluster("b", metrics={"m-b": 1})  # a push cluster the observer reaches
        b.spec.kubeconfig = sim.kubeconfig("b")
        await client.create(b)
        observer = ClusterObserver(watcher, lease=1.0)
        running = asyncio.create_task(observer.run())
        try:
            await wait_for(lambda: state_is(client, "b", ClusterState.ONLINE))
            async with h.running(api.url):
                async with agent(api.url, credential, sim.kubeconfig("edge"), "edge"):
                    await wait_for(lambda: state_is(client, "edge", ClusterState.ONLINE))
                    await client.create(h.app("web"))
                    assert await h.wait_bound(client, "web") == "edge"
                # its agent stopped: the lease lapses, and the application moves off
                await wait_for(lambda: state_is(client, "edge", ClusterState.OFFLINE))

                async def moved() -> bool:
                    return await h.bound_to(client, "web") == "b"

                await wait_for(moved, message="web moved to b")
                # nothing new lands there while it is away
                await client.create(h.app("de-only", labels=["location is DE"]))
                await asyncio.sleep(0.5)
                assert await h.bound_to(client, "de-only") is None
                # back: it takes applications again
                async with agent(api.url, credential, sim.kubeconfig("edge"), "edge"):
                    await wait_for(lambda: state_is(client, "edge", ClusterState.ONLINE))
                    assert await h.wait_bound(client, "de-only") == "edge"
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
