"""Builders shared by the scheduler tests: resources, a fast config, a running scheduler."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from shoal.client.rest import Conflict, ListResult, ShoalClient
from shoal.kube.controller import KubeController
from shoal.model.base import Metadata
from shoal.model.constraints import MetricRef
from shoal.model.core import GlobalMetricsProvider
from shoal.model.infrastructure import (
    Cloud,
    CloudSpec,
    GlobalCloud,
    OpenstackAuth,
    OpenstackSpec,
    PasswordAuth,
    PasswordProject,
    PasswordUser,
)
from shoal.model.kubernetes import Application
from shoal.model.scheduler_config import SchedulerConfig
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import shipped
from shoal.testing.builders import (  # noqa: F401
    KUBECONFIG,
    NS,
    app,
    cluster,
    metric,
    namespaced_metric,
    namespaced_provider,
    provider,
    register,
)
from tests.util import all_started, wait_for


def fast_config(**overrides: Any) -> SchedulerConfig:
    data: dict[str, Any] = {
        "backoff": {"initial": 0.1, "factor": 2, "cap": 0.5},
        "reschedule_after": 30.0,
        "metrics_refresh": 0.2,
        "workers": 8,
        "min_migration_interval": 0,  # moves at once; tests of pacing set their own
    }
    data.update(overrides)
    return SchedulerConfig.model_validate(data)


def openstack(metrics: dict[str, float] | None = None) -> CloudSpec:
    return CloudSpec(
        openstack=OpenstackSpec(
            url="https://keystone.example:5000/v3",
            auth=OpenstackAuth(
                password=PasswordAuth(
                    user=PasswordUser(username="u", password="p"),
                    project=PasswordProject(name="p"),
                )
            ),
            metrics=[MetricRef(name=m, weight=w) for m, w in (metrics or {}).items()],
        )
    )


def cloud(name: str, labels: dict[str, str] | None = None, **kw: Any) -> Cloud:
    return Cloud(
        metadata=Metadata(name=name, namespace=NS, labels=labels or {}), spec=openstack(**kw)
    )


def global_cloud(name: str, labels: dict[str, str] | None = None, **kw: Any) -> GlobalCloud:
    return GlobalCloud(metadata=Metadata(name=name, labels=labels or {}), spec=openstack(**kw))


@contextlib.asynccontextmanager
async def running(url: str, config: SchedulerConfig | None = None) -> AsyncIterator[Scheduler]:
    """A scheduler with its own client (``shoal up``'s scheduler identity), started and
    synced, stopped on exit."""
    async with shipped.client(url, "scheduler") as client:
        sch = Scheduler(client, config or fast_config())
        await sch.start()
        try:
            yield sch
        finally:
            await sch.stop()


async def metric_state_synced(sch: Scheduler, name: str) -> bool:
    """The scheduler knows cluster ``name``'s metrics fail and has no cluster work left:
    any state it would write for them is written."""
    backend = sch.clusters.get(NS, "Cluster", name)
    queue = sch.cluster_queue
    idle = len(queue) == 0 and queue.in_progress == 0
    return backend is not None and backend.metrics_failing and idle


@contextlib.asynccontextmanager
async def stack(client_of: shipped.Callers, config: SchedulerConfig) -> AsyncIterator[Scheduler]:
    """Scheduler, kube controller and cluster observer, each with the identity ``shoal up``
    gives it, fast enough for tests; stopped on exit."""
    scheduler = Scheduler(client_of("scheduler"), config)
    controller = KubeController(client_of("kube-controller"), poll_interval=0.2, timeout=1.0)
    observer = ClusterObserver(client_of("cluster-observer"), interval=0.3, timeout=0.5)
    async with all_started(observer, controller, scheduler):
        yield scheduler


async def get_app(client: ShoalClient, name: str) -> Application:
    return await client.get(Application, name, NS)


async def bound_to(client: ShoalClient, name: str) -> str | None:
    a = await get_app(client, name)
    return a.status.scheduled_to.name if a.status.scheduled_to else None


async def settle(seconds: float = 0.3) -> None:
    await asyncio.sleep(seconds)


async def bound_count(client: ShoalClient) -> int:
    apps = (await client.list(Application, NS)).items
    return sum(1 for a in apps if a.status.scheduled_to is not None)


async def binding_history(
    client: ShoalClient, until: int, timeout: float = 60
) -> tuple[Counter[str], dict[str, str | None]]:
    """Replay the applications' history from revision 0 to ``until``.

    Returns how often each application went from unbound to bound (MODIFIED
    with ``scheduled_to`` newly set), and where each one ended.
    """
    bindings: Counter[str] = Counter()
    current: dict[str, str | None] = {}

    async def replay() -> None:
        async for event in client.watch(Application, NS, resource_version=0):
            name = event.object.metadata.name
            target = event.object.status.scheduled_to
            now = target.name if target else None
            if event.type == "MODIFIED" and current.get(name) is None and now is not None:
                bindings[name] += 1
            current[name] = now
            if event.revision >= until:
                return

    await asyncio.wait_for(replay(), timeout)
    return bindings, current


def create_burst(client: ShoalClient, count: int) -> asyncio.Future[list[None]]:
    """Create applications ``app-00000`` … in the background, 32 requests in flight."""
    sem = asyncio.Semaphore(32)

    async def create(i: int) -> None:
        async with sem:
            await client.create(app(f"app-{i:05d}"))

    return asyncio.ensure_future(asyncio.gather(*(create(i) for i in range(count))))


async def all_bound(client: ShoalClient, count: int, timeout: float) -> ListResult[Application]:
    """Until all ``count`` applications are bound, and a second more; the listing then."""

    async def done() -> bool:
        return await bound_count(client) == count

    await wait_for(done, timeout=timeout, interval=0.5, message="all bound")
    await asyncio.sleep(1.0)  # room for a (wrong) second binding to show
    listing = await client.list(Application, NS)
    assert len(listing.items) == count
    assert all(a.status.scheduled_to is not None for a in listing.items)
    return listing


async def static_metrics(client: ShoalClient, values: dict[str, float], hi: float = 1.0) -> None:
    """A static provider ``static`` serving ``values``, and one GlobalMetric per value."""
    await client.create(provider("static", values))
    for name in values:
        await client.create(metric(name, hi=hi))


async def set_static(client: ShoalClient, values: dict[str, float], name: str = "static") -> None:
    """Change some values of the static provider ``name``.

    A compare-and-swap write: the scheduler writes the provider's status meanwhile,
    so a 409 means "read again and redo the change", as every Shoal writer does.
    """
    while True:
        prov = await client.get(GlobalMetricsProvider, name)
        assert prov.spec.static is not None
        prov.spec.static.metrics.update(values)
        try:
            await client.update(prov)
            return
        except Conflict:
            continue


async def wait_bound(
    client: ShoalClient, name: str, to: str | None = None, timeout: float = 5.0
) -> str:
    """Until application ``name`` is bound (to ``to``, when given); where it is bound."""

    async def target() -> str | None:
        where = await bound_to(client, name)
        return where if to is None or where == to else None

    result: str = await wait_for(target, timeout=timeout, message=f"{name} bound to {to}")
    return result
