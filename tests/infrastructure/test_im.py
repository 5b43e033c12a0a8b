"""The ``im`` provider against the Infrastructure Manager's own REST server (IM 2.0, PyPI).

IM runs from ``scripts/im-env`` with its Dummy cloud connector, the one part that
stands in for a real cloud: IM "starts" machines that do nothing, and reports
them configured. Everything else is IM's own code: its REST API, its TOSCA
handling, its states, outputs and deletion. The bound cloud's OpenStack login
points at nothing; IM then builds on the provider's next cloud, Dummy.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
import yaml

from shoal.client.rest import NotFound, ShoalClient
from shoal.infrastructure.im import InfrastructureManager, auth_header
from shoal.infrastructure.providers import InfrastructureNotFound, InfrastructureState
from shoal.model.base import Metadata
from shoal.model.infrastructure import (
    GlobalCloud,
    GlobalInfrastructureProvider,
    ImCloud,
    ImSpec,
    InfrastructureProviderSpec,
)
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.sim.server import SimServer
from shoal.testing.wait import wait_for
from tests.infrastructure.conftest import NS, openstack_via, template
from tests.infrastructure.fake_im import running_fake_im

pytestmark = pytest.mark.integration


def objects(im_url: str) -> tuple[GlobalInfrastructureProvider, GlobalCloud]:
    provider = GlobalInfrastructureProvider(
        metadata=Metadata(name="im"),
        spec=InfrastructureProviderSpec(type="im", im=ImSpec(
            url=im_url, username="shoal", password="secret",
            clouds=[ImCloud(id="dummy", type="Dummy")],
        )),
    )  # fmt: skip
    cloud = GlobalCloud(
        metadata=Metadata(name="os-de", labels={"location": "DE"}),
        spec=openstack_via("im"),
    )  # fmt: skip
    return provider, cloud


async def listed(session: aiohttp.ClientSession, im_url: str) -> list[str]:
    """The ids of the infrastructures IM lists (``GET /infrastructures``)."""
    provider, cloud = objects(im_url)
    headers = {"Authorization": auth_header(provider, cloud), "Accept": "application/json"}
    async with session.get(f"{im_url}/infrastructures", headers=headers) as answer:
        body = await answer.json(content_type=None)
    return [entry["uri"].rstrip("/").rsplit("/", 1)[-1] for entry in body.get("uri-list", [])]


def with_kubeconfig(kubeconfig: dict[str, Any]) -> dict[str, Any]:
    """The example template with a ``kubeconfig`` output, as IM gives a real cluster's."""
    tosca = template(workers=1)
    tosca["topology_template"]["outputs"] = {"kubeconfig": {"value": yaml.safe_dump(kubeconfig)}}
    return tosca


def test_the_auth_header_is_krakes() -> None:
    provider, cloud = objects("http://im")
    assert auth_header(provider, cloud).split("\\n") == [
        "id = im;type = InfrastructureManager;username = shoal;password = secret",
        "id = os-de;type = OpenStack;host = http://127.0.0.1:9/v3;auth_version = 3.x_password;"
        "username = u;password = p;tenant = t",
        "id = dummy;type = Dummy",
    ]


async def test_create_poll_outputs_reconcile_delete(im_url: str, sim: SimServer) -> None:
    await create_poll_outputs_reconcile_delete(im_url, sim)


async def test_the_stand_in_answers_as_im_does(sim: SimServer) -> None:
    """``fake_im``, which other tests use to fail on cue, passes the same steps as IM."""
    async with running_fake_im() as fake:
        await create_poll_outputs_reconcile_delete(fake.url, sim)


async def create_poll_outputs_reconcile_delete(im_url: str, sim: SimServer) -> None:
    sim.clusters.add_cluster("built", 1)
    provider, cloud = objects(im_url)
    async with aiohttp.ClientSession() as session:
        im = InfrastructureManager(provider, cloud, session)
        assert await im.find("edge-1-0123abcd") is None
        made = await im.create("edge-1-0123abcd", with_kubeconfig(sim.kubeconfig("built")))
        assert await im.find("edge-1-0123abcd") == made  # IM kept Shoal's mark
        assert await im.find("other-0123abcd") is None
        # a create is not idempotent: the same one again makes a second infrastructure
        once = await im.create("twice-0123abcd", template(workers=1))
        twice = await im.create("twice-0123abcd", template(workers=1))
        assert len({made, once, twice}) == 3
        assert {made, once, twice} <= set(await listed(session, im_url))

        async def configured() -> bool:
            return await im.state(made) is InfrastructureState.CONFIGURED

        await wait_for(configured, timeout=60, interval=0.2, message="IM configured it")
        assert await im.kubeconfig(made) == sim.kubeconfig("built")
        await im.reconcile(made, with_kubeconfig(sim.kubeconfig("built")))
        await wait_for(configured, timeout=60, interval=0.2, message="configured again")
        await im.delete(made)

        async def gone() -> bool:
            try:
                state = await im.state(made)
            except InfrastructureNotFound:
                return True
            if state is not InfrastructureState.DELETING:
                await im.delete(made)  # IM may drop a delete made while it still changed it
            return False

        await wait_for(gone, timeout=60, interval=0.5, message="IM deleted it")
        await im.delete(made)  # deleting what is gone is not an error
        assert await im.find("edge-1-0123abcd") is None


@pytest.mark.usefixtures("control_plane")
async def test_a_cluster_built_through_im_goes_online_and_is_deleted(
    client: ShoalClient, im_url: str, sim: SimServer
) -> None:
    sim.clusters.add_cluster("built", 2)
    provider, cloud = objects(im_url)
    await client.create(provider)
    await client.create(cloud)
    # cloud-de (sim) is also labelled DE: a metric-free tie is broken by name; ask for os-de
    cluster = Cluster.model_validate({
        "metadata": {"name": "im-1", "namespace": NS},
        "spec": {"tosca": with_kubeconfig(sim.kubeconfig("built")),
                 "constraints": {"cloud": {"labels": ["location is DE"]}}},
    })  # fmt: skip
    await client.delete(GlobalCloud, "cloud-de")  # only IM's cloud is left in DE
    await client.create(cluster)

    async def online() -> Cluster | None:
        current = await client.get(Cluster, "im-1", NS)
        return current if current.status.state is ClusterState.ONLINE else None

    built = await wait_for(online, timeout=60, interval=0.2, message="im-1 ONLINE through IM")
    assert built.status.scheduled_to is not None and built.status.scheduled_to.name == "os-de"
    assert built.spec.kubeconfig == sim.kubeconfig("built")
    infrastructure = built.status.cluster_id
    assert infrastructure
    async with aiohttp.ClientSession() as session:
        im = InfrastructureManager(provider, cloud, session)
        assert await im.state(infrastructure) is InfrastructureState.CONFIGURED
        await client.delete(Cluster, "im-1", NS)

        async def removed() -> bool:
            try:
                await client.get(Cluster, "im-1", NS)
                return False
            except NotFound:
                pass
            try:
                await im.state(infrastructure)
            except InfrastructureNotFound:
                return True
            return False

        await wait_for(removed, timeout=60, interval=0.2, message="im-1 and its infrastructure")
