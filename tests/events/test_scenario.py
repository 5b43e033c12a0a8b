"""One application's life told by its events: every component in process, sim clusters.

Created before any cluster exists (a retry), placed when clusters come online,
migrated when the metrics change, moved back by a RescheduleTask against the
stickiness that kept it, then deleted; the events say so, in order, with the
numbers.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from shoal.client.rest import ShoalClient
from shoal.events.recorder import KIND_LABEL, NAME_LABEL
from shoal.kube.controller import KubeController
from shoal.model.base import Metadata
from shoal.model.core import GlobalMetricsProvider
from shoal.model.events import Event
from shoal.model.kubernetes import Application, ApplicationSpec, Cluster, ClusterSpec, MetricRef
from shoal.model.scheduler_config import Backoff, SchedulerConfig
from shoal.model.scheduling import RescheduleTask, RescheduleTaskSpec, ResourceSelector
from shoal.observer.controller import ClusterObserver
from shoal.reschedule.controller import RescheduleTaskController
from shoal.scheduler.scheduler import Scheduler
from shoal.sim.server import SimServer
from shoal.testing import shipped
from shoal.testing.builders import deployment, metric, provider
from shoal.testing.wait import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NS = "default"
# b scores 0.6 and a 0.4; with stickiness 1, the current cluster gets (v + 1) / 2.
CONFIG = SchedulerConfig(
    stickiness=1.0,
    reschedule_after=0.3,
    metrics_refresh=0.3,
    retries=5,
    backoff=Backoff(initial=0.5, cap=1.0),
    min_migration_interval=0,  # it migrates as soon as the metrics say (no pacing)
)
MANIFEST = [deployment("web", "nginx:1", replicas=2)]


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """Two clusters of one node."""
    return dict(clusters=["a", "b"], nodes=1, pod_start_delay=0.05)


async def events_of(client: ShoalClient, kind: str, name: str) -> list[Event]:
    selector = f"{KIND_LABEL}={kind},{NAME_LABEL}={name}"
    listed = await client.list(Event, NS, label_selector=selector)
    return sorted(listed.items, key=lambda e: (e.first_timestamp, e.metadata.name))


async def until(client: ShoalClient, kind: str, name: str, reason: str, count: int = 1) -> Event:
    async def found() -> Event | None:
        for event in await events_of(client, kind, name):
            if event.reason == reason and event.count >= count:
                return event
        return None

    found_event: Event = await wait_for(found, timeout=20, message=f"{reason} of {name}")
    return found_event


async def set_values(client: ShoalClient, values: dict[str, float]) -> None:
    current = await client.get(GlobalMetricsProvider, "st")
    assert current.spec.static is not None
    current.spec.static.metrics = values
    await client.update(current)


async def test_one_application_told_by_its_events(client: ShoalClient, sim: SimServer) -> None:
    url = client.url
    components: list[tuple[Any, ShoalClient]] = []
    for identity, make in (
        ("scheduler", lambda c: Scheduler(c, CONFIG)),
        ("kube-controller", lambda c: KubeController(c, resync=1.0)),
        ("cluster-observer", lambda c: ClusterObserver(c, interval=5.0)),
        ("reschedule-controller", lambda c: RescheduleTaskController(c)),
    ):
        own = shipped.client(url, identity)
        component = make(own)
        recorder = (
            component.apps_handler.events if isinstance(component, Scheduler) else component.events
        )
        recorder.interval = 0.1
        await component.start()
        components.append((component, own))
    try:
        await client.create(provider("st", {"a": 0.4, "b": 0.6}))
        for name in ("a", "b"):
            await client.create(metric(f"m-{name}", "st", key=name))
        app = Application(
            metadata=Metadata(name="web", namespace=NS),
            spec=ApplicationSpec.model_validate({"manifest": MANIFEST}),
        )
        await client.create(app)
        retry = await until(client, "Application", "web", "Unschedulable")
        assert retry.type == "Warning" and retry.reporting_component == "scheduler"
        assert re.match(
            r"No cluster fits, retry 1/5 in 0\.5 s: no clusters in namespace", retry.message
        )

        for name in ("b", "a"):  # b first: the application goes there at once
            spec = ClusterSpec(
                kubeconfig=sim.clusters.kubeconfig(name),
                metrics=[MetricRef(name=f"m-{name}", weight=1)],
            )
            await client.create(Cluster(metadata=Metadata(name=name, namespace=NS), spec=spec))
            online = await until(client, "Cluster", name, "Online")
            assert re.search(r"→ ONLINE, 1/1 nodes ready", online.message), online.message
            assert online.reporting_component == "cluster-observer"
        scheduled = await until(client, "Application", "web", "Scheduled")
        assert scheduled.message == "Scheduled to b (score 0.600, 1/1 clusters available)"
        deployed = await until(client, "Application", "web", "Deployed")
        assert (
            deployed.message.startswith("Deployed on b: ")
            and "1 objects applied" in deployed.message
        )

        await set_values(client, {"a": 0.95, "b": 0.1})
        migrated = await until(client, "Application", "web", "Migrated")
        assert migrated.message == (
            "Migrated from b (score 0.550, stickiness 1) to a (score 0.950, 2/2 clusters available)"
        )

        async def deployed_on(cluster: str) -> bool:
            events = await events_of(client, "Application", "web")
            return any(e.reason == "Deployed" and f"on {cluster}:" in e.message for e in events)

        await wait_for(lambda: deployed_on("a"), timeout=20, message="deployed on a")
        await set_values(client, {"a": 0.4, "b": 0.6})  # a keeps it: (0.4 + 1) / 2 > 0.6
        # The request must meet these values: a pass on the old ones (a 0.95) answers it
        # by staying on a, and nothing would move it after.
        scheduler = components[0][0]
        assert isinstance(scheduler, Scheduler)

        def sees(name: str, value: float) -> bool:
            seen = scheduler.metrics.lookup(f"m-{name}", False, None)
            return getattr(seen, "value", None) == value

        await wait_for(
            lambda: sees("a", 0.4) and sees("b", 0.6), timeout=20, message="new values seen"
        )
        task = RescheduleTaskSpec(target_ref_resource=[ResourceSelector(namespace=NS, name="web")])
        await client.create(RescheduleTask(metadata=Metadata(name="back"), spec=task))
        requested = await until(client, "Application", "web", "RescheduleRequested")
        # the task acts for its requester, the administrator, and says so
        expected = "Reschedule requested by RescheduleTask back (for admin), now on a"
        assert requested.message == expected
        await until(client, "Application", "web", "Migrated", count=1)
        told = await until(client, "RescheduleTask", "back", "RescheduleRequested")
        assert told.message == "Requested for 1 of 1 targets"
        assert len(await events_of(client, "RescheduleTask", "back")) == 1

        async def moved_back() -> bool:
            events = await events_of(client, "Application", "web")
            return any(e.message.endswith("on request") for e in events if e.reason == "Migrated")

        await wait_for(moved_back, timeout=20, message="moved back on request")
        await until(client, "Application", "web", "Deployed", count=2)  # on b again
        await client.delete(Application, "web", NS)
        await until(client, "Application", "web", "Deleted")

        events = await events_of(client, "Application", "web")
        assert [(e.reason, e.reporting_component) for e in events] == [
            ("Unschedulable", "scheduler"),
            ("Scheduled", "scheduler"),
            ("Deployed", "kube-controller"),
            ("Migrated", "scheduler"),
            ("Deployed", "kube-controller"),
            ("RescheduleRequested", "reschedule-controller"),
            ("Migrated", "scheduler"),
            ("Deleted", "kube-controller"),
        ]
        assert events[6].message == (
            "Migrated from a (score 0.400) to b (score 0.600, 2/2 clusters available), on request"
        )
        assert events[2].message == "Deployed on b: 2/2 pods ready, 1 objects applied"
        assert [e.count for e in events if e.reason == "Deployed"] == [2, 1]
        assert all(e.involved_object.uid == retry.involved_object.uid for e in events)
    finally:
        for component, own in components:
            await component.stop()
            await own.close()
