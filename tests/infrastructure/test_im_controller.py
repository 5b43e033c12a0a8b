"""The infrastructure controller against an IM whose create is not idempotent (as IM's is
not), and which fails, answers late or never finishes on cue (``fake_im``).

Every outcome is read from the provider: its inventory (which infrastructures exist, made
for which cluster) and its call log (which call, when). A back-off is measured as the time
between two creates the provider received.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import yaml

from shoal.client.rest import ShoalClient
from shoal.infrastructure.controller import InfrastructureController, key
from shoal.kube.controller import KubeController
from shoal.model.base import Metadata
from shoal.model.events import Event
from shoal.model.infrastructure import (
    GlobalCloud,
    GlobalInfrastructureProvider,
    ImSpec,
    InfrastructureProviderSpec,
)
from shoal.model.kubernetes import Application, Cluster, ClusterSpec, ClusterState
from shoal.model.scheduler_config import Backoff
from shoal.observer.controller import ClusterObserver
from shoal.scheduler.scheduler import Scheduler
from shoal.sim.objects import DEPLOYMENTS
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.infrastructure.conftest import NS, cluster_on_cloud, openstack_via, template
from tests.infrastructure.fake_im import FakeIm, running_fake_im
from tests.scheduler.helpers import fast_config
from tests.util import all_started, until_gone

# a gap between two attempts is at least the back-off, less a timer's rounding
EARLY = 0.05


@pytest.fixture
async def im() -> AsyncIterator[FakeIm]:
    async with running_fake_im() as server:
        yield server


@pytest.fixture
async def im_cloud(client: ShoalClient, im: FakeIm) -> None:
    """The provider ``im`` on the fake IM, and the cloud ``os-de`` (DE) that names it."""
    await client.create(GlobalInfrastructureProvider(
        metadata=Metadata(name="im"),
        spec=InfrastructureProviderSpec(type="im", im=ImSpec(
            url=im.url, username="shoal", password="secret")),
    ))  # fmt: skip
    await client.create(GlobalCloud(
        metadata=Metadata(name="os-de", labels={"location": "DE"}),
        spec=openstack_via("im"),
    ))  # fmt: skip


@asynccontextmanager
async def building(client: ShoalClient, *before: Any, **controller: Any) -> AsyncIterator[None]:
    """The parts ``before``, the scheduler and an infrastructure controller polling IM every
    0.1 s with the settings ``controller`` (timeouts, back-off), running; stopped after."""
    parts = [*before, Scheduler(client, fast_config()),
             InfrastructureController(client, poll=0.1, **controller)]  # fmt: skip
    async with all_started(*parts):
        yield


def with_kubeconfig(kubeconfig: dict[str, Any], workers: int = 1) -> dict[str, Any]:
    """The example template with a ``kubeconfig`` output, as IM gives a built cluster's."""
    tosca = template(workers=workers)
    tosca["topology_template"]["outputs"] = {"kubeconfig": {"value": yaml.safe_dump(kubeconfig)}}
    return tosca


def create_times(im: FakeIm) -> list[float]:
    return [c.when for c in im.calls if c.method == "POST" and c.path == ""]


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


async def reason_of(client: ShoalClient, name: str) -> str:
    cluster = await client.get(Cluster, name, NS)
    return cluster.status.reason.message if cluster.status.reason is not None else ""


async def messages_of(client: ShoalClient, name: str, reason: str) -> list[str]:
    """The messages of the cluster's events of this reason, once there is one (events are
    written in the background)."""

    async def found() -> list[str]:
        return [e.message for e in (await client.list(Event, NS)).items
                if e.involved_object.name == name and e.reason == reason]  # fmt: skip

    return await wait_for(found, timeout=10, interval=0.05, message=f"a {reason} event")


def test_the_back_off_doubles_up_to_its_cap_however_many_attempts() -> None:
    backoff = Backoff(initial=2.0, factor=2.0, cap=300.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 4, 8, 9)] == [2, 4, 8, 16, 256, 300]
    assert backoff.delay(1025) == backoff.delay(10**6) == 300.0  # 2**1024 overflows a float


@pytest.mark.usefixtures("im_cloud")
async def test_a_refused_create_backs_off_and_only_a_new_template_tries_earlier(
    client: ShoalClient, im: FakeIm
) -> None:
    im.refuse_create = (500, "the cloud is out of quota")
    async with building(client, timeout=2.0, retry_delay=1.0, retry_cap=4.0):
        await client.create(cluster_on_cloud("edge-1", "DE"))

        async def attempts(n: int) -> bool:
            return len(create_times(im)) >= n

        await wait_for(lambda: attempts(4), timeout=30, interval=0.05, message="4 creates")
        # 1, 2, then 4 s (the cap) between creates: never sooner
        spaced = gaps(create_times(im)[:4])
        assert [round(g) for g in spaced] == [1, 2, 4], spaced
        assert all(g >= want - EARLY for g, want in zip(spaced, (1, 2, 4), strict=True)), spaced
        assert "(attempt 3; next in 4 s)" in await reason_of(client, "edge-1") or (
            "(attempt 4; next in 4 s)" in await reason_of(client, "edge-1")
        )

        # changes that are not the user's template wait for the retry: a label, its echo
        await wait_for(lambda: attempts(5), timeout=30, interval=0.05, message="a 5th create")
        fifth = create_times(im)[4]
        cluster = await client.get(Cluster, "edge-1", NS)
        cluster.metadata.labels["touched"] = "yes"
        await client.update(cluster)
        await wait_for(lambda: attempts(6), timeout=30, interval=0.05, message="a 6th create")
        assert create_times(im)[5] - fifth >= 4 - EARLY

        # one Warning per cause, counted over the attempts, not one per attempt
        async def counted() -> list[Event]:
            events = [e for e in (await client.list(Event, NS)).items
                      if e.involved_object.name == "edge-1" and e.type == "Warning"]  # fmt: skip
            return events if events and events[0].count >= 5 else []

        warnings = await wait_for(counted, timeout=20, interval=0.1, message="5 counted")
        assert [(e.reason, e.involved_object.kind) for e in warnings] == [
            ("InfrastructureFailed", "Cluster")
        ]
        assert "out of quota" in warnings[0].message

        # the user's new template: tried at once, and the back-off starts again from 1 s
        sixth = create_times(im)[5]
        cluster = await client.get(Cluster, "edge-1", NS)
        cluster.spec.tosca = template(workers=3)
        await client.update(cluster)
        await wait_for(lambda: attempts(7), timeout=30, interval=0.05, message="a 7th create")
        assert create_times(im)[6] - sixth < 4 - EARLY
        await wait_for(lambda: attempts(8), timeout=30, interval=0.05, message="an 8th create")
        assert 1 - EARLY <= create_times(im)[7] - create_times(im)[6] < 2
        assert im.infrastructures == {}


@pytest.mark.usefixtures("im_cloud")
async def test_a_create_whose_answer_was_lost_is_found_not_made_twice(
    client: ShoalClient, im: FakeIm, sim: SimServer
) -> None:
    sim.clusters.add_cluster("built", 1)
    im.create_delay = 2.0  # made at once, answered after the controller gave up (1 s)
    async with building(client, timeout=1.0, retry_delay=1.0, retry_cap=4.0):
        created = await client.create(
            cluster_on_cloud("edge-1", "DE", tosca=with_kubeconfig(sim.kubeconfig("built")))
        )

        async def connected() -> Cluster | None:
            cluster = await client.get(Cluster, "edge-1", NS)
            return cluster if cluster.spec.kubeconfig is not None else None

        cluster = await wait_for(connected, timeout=30, interval=0.05, message="edge-1 built")
        assert im.count("POST") == 1  # one create, and no change of what it made after
        assert list(im.infrastructures) == im.marked(key(created)) == ["inf-1"]
        assert cluster.status.cluster_id == "inf-1"
        assert cluster.spec.kubeconfig == sim.kubeconfig("built")
        assert cluster.status.running_on is not None
        assert (cluster.status.running_on.kind, cluster.status.running_on.name) == (
            "GlobalCloud",
            "os-de",
        )
        assert await messages_of(client, "edge-1", "Creating") == ["im had created inf-1"]


@pytest.mark.usefixtures("im_cloud")
async def test_a_cluster_deleted_before_its_id_was_recorded_leaks_nothing(
    client: ShoalClient, im: FakeIm
) -> None:
    im.create_delay = 2.0  # the controller waits for the answer (5 s) while it is deleted
    async with building(client, timeout=5.0, retry_delay=1.0, retry_cap=4.0):
        created = await client.create(cluster_on_cloud("edge-1", "DE"))

        async def made() -> bool:
            return bool(im.marked(key(created)))

        await wait_for(made, timeout=30, interval=0.02, message="the create reached IM")
        creating = await client.get(Cluster, "edge-1", NS)
        assert creating.status.cluster_id is None
        assert creating.status.state is ClusterState.CREATING  # written before the create
        await client.delete(Cluster, "edge-1", NS)
        await until_gone(client, Cluster, "edge-1", NS, timeout=30)
        assert im.infrastructures == {}
        assert im.count("DELETE", "/inf-1") == 1


@pytest.mark.usefixtures("im_cloud")
async def test_deleting_a_failed_cluster_with_nothing_made_finishes_at_once(
    client: ShoalClient, im: FakeIm
) -> None:
    im.refuse_create = (400, "Error parsing the TOSCA template: no compute node")
    async with building(client, timeout=2.0, retry_delay=60.0, retry_cap=60.0):
        await client.create(cluster_on_cloud("edge-1", "DE"))

        async def failed() -> bool:
            cluster = await client.get(Cluster, "edge-1", NS)
            return cluster.status.state is ClusterState.FAILED

        await wait_for(failed, timeout=30, interval=0.05, message="edge-1 FAILED")
        assert "next in 60 s" in await reason_of(client, "edge-1")
        await client.delete(Cluster, "edge-1", NS)
        # well before its next build attempt (60 s): the provider holds nothing for it
        await until_gone(client, Cluster, "edge-1", NS, timeout=20)
        assert im.infrastructures == {}
        assert im.count("POST") == 1
        assert im.count("DELETE") == 0


@pytest.mark.usefixtures("im_cloud")
async def test_a_build_that_never_finishes_times_out_and_backs_off(
    client: ShoalClient, im: FakeIm
) -> None:
    im.build_time = None  # IM's machines never get configured
    async with building(client, timeout=2.0, create_timeout=1.5, retry_delay=30.0, retry_cap=30.0):
        await client.create(cluster_on_cloud("edge-1", "DE"))

        async def timed_out() -> bool:
            return "not configured after 1.5 s" in await reason_of(client, "edge-1")

        await wait_for(timed_out, timeout=30, interval=0.05, message="the create timeout")
        created = create_times(im)[0]
        polls = [c.when for c in im.calls if c.method == "GET" and c.path.endswith("/state")]
        assert polls[-1] - created >= 1.5  # polled for its whole time, and no longer
        # its 30 s back-off: no more polls for now (a window of 1 s)
        await asyncio.sleep(1.0)
        assert im.count("GET", "/state", since=polls[-1] + 0.01) == 0
        assert list(im.infrastructures) == ["inf-1"]  # kept: a retry follows it again


@pytest.mark.usefixtures("im_cloud")
async def test_the_infrastructure_is_deleted_only_once_its_applications_moved(
    client: ShoalClient, im: FakeIm, sim: SimServer
) -> None:
    sim.clusters.add_cluster("built", 2)
    sim.clusters.add_cluster("spare", 2)
    left_on_built: list[Any] = []
    im.on_delete = lambda ident: left_on_built.append(
        sim.clusters.cluster("built").store.get(DEPLOYMENTS, NS, "web")
    )
    async with building(
        client,
        ClusterObserver(client, interval=0.3, timeout=0.5),
        KubeController(client, poll_interval=0.2, timeout=1.0),
        timeout=2.0,
        retry_delay=1.0,
        retry_cap=4.0,
    ):
        await client.create(cluster_on_cloud(
            "edge-1", "DE", tosca=with_kubeconfig(sim.kubeconfig("built"), 2), site="edge"
        ))  # fmt: skip

        async def online(name: str) -> bool:
            cluster = await client.get(Cluster, name, NS)
            return cluster.status.state is ClusterState.ONLINE

        await wait_for(lambda: online("edge-1"), timeout=30, interval=0.1, message="edge-1")
        await client.create(Application.model_validate({
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"manifest": [builders.deployment("web", "nginx:1", replicas=2)],
                     "constraints": {"cluster": {"labels": ["site is edge"]}}},
        }))  # fmt: skip

        async def deployed_on_built() -> bool:
            return sim.clusters.cluster("built").store.get(DEPLOYMENTS, NS, "web") is not None

        await wait_for(deployed_on_built, timeout=30, interval=0.1, message="web on built")
        await client.create(Cluster(
            metadata=Metadata(name="spare", namespace=NS, labels={"site": "edge"}),
            spec=ClusterSpec(kubeconfig=sim.kubeconfig("spare")),
        ))  # fmt: skip
        await wait_for(lambda: online("spare"), timeout=30, interval=0.1, message="spare")
        await client.delete(Cluster, "edge-1", NS)
        await until_gone(client, Cluster, "edge-1", NS, timeout=60)
        assert im.infrastructures == {}
        assert left_on_built == [None]  # when IM was told to delete, web had left it
        assert sim.clusters.cluster("spare").store.get(DEPLOYMENTS, NS, "web") is not None


async def handed_over(client: ShoalClient, name: str) -> Cluster | None:
    """The cluster once built: its kubeconfig written, then CONNECTING (for the observer)."""
    cluster = await client.get(Cluster, name, NS)
    built = cluster.spec.kubeconfig is not None
    return cluster if built and cluster.status.state is ClusterState.CONNECTING else None


@pytest.mark.usefixtures("im_cloud")
async def test_an_infrastructure_left_unconfigured_is_configured_again_then_connected(
    client: ShoalClient, im: FakeIm, sim: SimServer
) -> None:
    sim.clusters.add_cluster("built", 1)
    im.states["inf-1"] = "unconfigured"  # a machine failed to configure
    async with building(client, timeout=2.0, retry_delay=30.0, retry_cap=30.0):
        await client.create(
            cluster_on_cloud("edge-1", "DE", tosca=with_kubeconfig(sim.kubeconfig("built")))
        )

        async def reconfiguring() -> Cluster | None:
            cluster = await client.get(Cluster, "edge-1", NS)
            asked = im.count("PUT", "/inf-1/reconfigure") >= 1
            failing = cluster.status.state is ClusterState.FAILING_RECONCILIATION
            return cluster if asked and failing else None

        cluster = await wait_for(reconfiguring, timeout=30, interval=0.05, message="reconfigure")
        assert cluster.spec.kubeconfig is None
        del im.states["inf-1"]  # configured now
        cluster = await wait_for(lambda: handed_over(client, "edge-1"), timeout=30,
                                 interval=0.05, message="edge-1 connected")  # fmt: skip
        assert cluster.spec.kubeconfig == sim.kubeconfig("built")
        assert cluster.status.state is ClusterState.CONNECTING
        assert cluster.status.reason is None
        assert cluster.status.cluster_id == "inf-1"
        assert list(im.infrastructures) == ["inf-1"]
        assert im.count("POST") == 1


@pytest.mark.usefixtures("im_cloud")
async def test_an_infrastructure_the_provider_forgot_is_built_again_after_the_back_off(
    client: ShoalClient, im: FakeIm, sim: SimServer
) -> None:
    sim.clusters.add_cluster("built", 1)
    im.build_time = None  # still being built when IM forgets it
    async with building(client, timeout=2.0, retry_delay=1.0, retry_cap=4.0):
        await client.create(
            cluster_on_cloud("edge-1", "DE", tosca=with_kubeconfig(sim.kubeconfig("built")))
        )

        async def recorded() -> bool:
            return (await client.get(Cluster, "edge-1", NS)).status.cluster_id == "inf-1"

        await wait_for(recorded, timeout=30, interval=0.05, message="inf-1 recorded")
        del im.infrastructures["inf-1"]

        async def forgotten() -> Cluster | None:
            cluster = await client.get(Cluster, "edge-1", NS)
            return cluster if cluster.status.state is ClusterState.FAILED else None

        cluster = await wait_for(forgotten, timeout=30, interval=0.05, message="edge-1 FAILED")
        assert cluster.status.reason is not None
        assert cluster.status.reason.code.name == "CREATE_FAILED"
        assert cluster.status.reason.message == (
            "im no longer knows inf-1 (attempt 1; next in 1 s)"
        )
        assert cluster.status.cluster_id is None  # forgotten here too
        assert not cluster.status.last_applied_tosca  # nothing applied any more
        gone_read = max(c.when for c in im.calls if c.path == "/inf-1/state")
        im.build_time = 0.0
        cluster = await wait_for(lambda: handed_over(client, "edge-1"), timeout=30,
                                 interval=0.05, message="edge-1 built again")  # fmt: skip
        assert cluster.status.cluster_id == "inf-2"
        assert list(im.infrastructures) == ["inf-2"]
        assert create_times(im)[1] - gone_read >= 1 - EARLY  # after the back-off, not at once
        assert await messages_of(client, "edge-1", "InfrastructureGone") == [
            "im no longer knows inf-1; building it again"
        ]


@pytest.mark.usefixtures("im_cloud")
async def test_an_infrastructure_the_provider_reports_failed_fails_the_create(
    client: ShoalClient, im: FakeIm
) -> None:
    im.states["inf-1"] = "failed"
    async with building(client, timeout=2.0, retry_delay=30.0, retry_cap=30.0):
        await client.create(cluster_on_cloud("edge-1", "DE"))

        async def failed() -> Cluster | None:
            cluster = await client.get(Cluster, "edge-1", NS)
            return cluster if cluster.status.state is ClusterState.FAILED else None

        cluster = await wait_for(failed, timeout=30, interval=0.05, message="edge-1 FAILED")
        assert cluster.status.reason is not None
        assert cluster.status.reason.code.name == "CREATE_FAILED"
        assert cluster.status.reason.message == (
            "im reports infrastructure inf-1 failed (attempt 1; next in 30 s)"
        )
        assert cluster.status.cluster_id == "inf-1"  # kept: the retry looks at it again
        assert list(im.infrastructures) == ["inf-1"]
        assert im.count("POST") == 1


@pytest.mark.usefixtures("im_cloud")
async def test_a_create_answer_that_cannot_be_read_fails_and_the_retry_finds_what_it_made(
    client: ShoalClient, im: FakeIm, sim: SimServer
) -> None:
    sim.clusters.add_cluster("built", 1)
    im.create_answer = '{"id": "inf-1"}'  # not IM's {"uri": …}; made all the same
    async with building(client, timeout=2.0, retry_delay=1.0, retry_cap=4.0):
        await client.create(
            cluster_on_cloud("edge-1", "DE", tosca=with_kubeconfig(sim.kubeconfig("built")))
        )

        async def failed() -> Cluster | None:
            cluster = await client.get(Cluster, "edge-1", NS)
            return cluster if cluster.status.state is ClusterState.FAILED else None

        cluster = await wait_for(failed, timeout=30, interval=0.05, message="edge-1 FAILED")
        assert cluster.status.reason is not None
        assert cluster.status.reason.code.name == "CREATE_FAILED"
        assert cluster.status.reason.message == (
            "the provider's answer could not be read: KeyError: 'uri' (attempt 1; next in 1 s)"
        )
        assert cluster.status.cluster_id is None
        im.create_answer = None
        cluster = await wait_for(lambda: handed_over(client, "edge-1"), timeout=30,
                                 interval=0.05, message="edge-1 built")  # fmt: skip
        assert cluster.status.cluster_id == "inf-1"
        assert im.count("POST") == 1  # the retry found inf-1: never made twice
        assert list(im.infrastructures) == ["inf-1"]
