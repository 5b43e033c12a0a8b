"""A tenant's cluster whose build keeps failing, under the security ``shoal up`` ships
(tokens, RBAC, anonymous refused) and the controller's shipped settings: the tenant's
own IM receives one create per back-off step, not a flood.

alice (every right on namespace ``a``) names her own IM in a namespaced provider and
cloud; her IM refuses every create. The scheduler and the infrastructure controller
run as their component identities.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from shoal.api.server import start_api
from shoal.client.rest import ShoalClient
from shoal.infrastructure.controller import InfrastructureController
from shoal.model.base import Metadata
from shoal.model.events import Event
from shoal.model.infrastructure import (
    Cloud,
    ImSpec,
    InfrastructureProvider,
    InfrastructureProviderSpec,
)
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.scheduler.scheduler import Scheduler
from shoal.testing.wait import wait_for
from tests.infrastructure.conftest import openstack_via, template
from tests.infrastructure.fake_im import FakeIm, running_fake_im
from tests.scheduler.helpers import fast_config
from tests.security.conftest import binding, security, tenant_role
from tests.util import all_started

TOKENS = {
    "admin": "admin-token",
    "alice": "alice-token",
    "system:scheduler": "scheduler-token",
    "system:infrastructure-controller": "infrastructure-token",
}


@pytest.fixture
async def api_url(tmp_path: Path, tenants_may_reach_loopback: None) -> AsyncIterator[str]:
    """A secured API with admin, alice (namespace ``a``) and the two components."""
    tokens = tmp_path / "component-tokens.csv"
    groups = {"admin": "shoal:admins"}
    tokens.write_text("".join(f'{t},{u},{u},"{groups.get(u, "")}"\n' for u, t in TOKENS.items()))
    server = await start_api(
        f"sqlite://{tmp_path / 'shoal.db'}", security=security(tmp_path, token_file=tokens)
    )
    try:
        async with httpx.AsyncClient(
            base_url=server.url, headers={"authorization": "Bearer admin-token"}
        ) as admin:
            assert (await admin.post("/core/roles", json=tenant_role("a"))).status_code == 200
            body = binding("tenant-a", ["alice"], ["tenant-a"])
            assert (await admin.post("/core/rolebindings", json=body)).status_code == 200
            assert (await httpx.AsyncClient(base_url=server.url).get(
                "/kubernetes/namespaces/a/clusters")).status_code == 401  # fmt: skip
        yield server.url
    finally:
        await server.stop()


async def alices_cloud(alice: ShoalClient, im: FakeIm) -> None:
    await alice.create(InfrastructureProvider(
        metadata=Metadata(name="my-im", namespace="a"),
        spec=InfrastructureProviderSpec(type="im", im=ImSpec(url=im.url, token="alice-im")),
    ))  # fmt: skip
    await alice.create(Cloud(
        metadata=Metadata(name="my-cloud", namespace="a", labels={"location": "DE"}),
        spec=openstack_via("my-im", namespaced=True),
    ))  # fmt: skip


@asynccontextmanager
async def alice_and_parts(
    api_url: str, make: Callable[[], FakeIm] = FakeIm
) -> AsyncIterator[tuple[FakeIm, ShoalClient]]:
    """alice's own IM and her cloud on it, with the scheduler and the infrastructure
    controller running as their component identities (the controller's shipped back-off:
    2, 4 … 300 s)."""
    async with (
        running_fake_im(make) as im,
        ShoalClient(api_url, token="alice-token") as alice,
        ShoalClient(api_url, token="scheduler-token") as scheduler_client,
        ShoalClient(api_url, token="infrastructure-token") as controller_client,
    ):
        await alices_cloud(alice, im)
        parts = [Scheduler(scheduler_client, fast_config()),
                 InfrastructureController(controller_client)]  # fmt: skip
        async with all_started(*parts):
            yield im, alice


async def create_edge(alice: ShoalClient, name: str = "edge-1") -> None:
    """alice's cluster ``name`` in namespace ``a``, placed on a cloud labelled DE."""
    await alice.create(Cluster.model_validate({
        "metadata": {"name": name, "namespace": "a"},
        "spec": {"tosca": template(), "constraints": {
            "cloud": {"labels": ["location is DE"]}}},
    }))  # fmt: skip


async def creates_after_first(im: FakeIm) -> list[float]:
    """The times of the IM's creates over the 5 s after the first: the back-off lets
    through the ones at 0 and 2 s, the next comes at 6 s."""

    async def first() -> bool:
        return im.count("POST") >= 1

    await wait_for(first, timeout=30, interval=0.05, message="the first create")
    await asyncio.sleep(5.0)  # the window: creates at 0 and 2 s, the next at 6 s
    creates = [c.when for c in im.calls if c.method == "POST"]
    assert len(creates) <= 2, [round(b - a, 2) for a, b in itertools.pairwise(creates)]
    assert all(b - a >= 2 - 0.05 for a, b in itertools.pairwise(creates))
    return creates


async def test_a_tenants_failing_build_calls_her_im_once_per_back_off_step(
    api_url: str,
) -> None:
    async with alice_and_parts(api_url) as (im, alice):
        im.refuse_create = (500, "no")
        await create_edge(alice)
        creates = await creates_after_first(im)

        cluster = await alice.get(Cluster, "edge-1", "a")
        assert cluster.status.state is ClusterState.FAILED
        assert cluster.status.reason is not None
        assert f"(attempt {len(creates)}; next in {2 ** len(creates)} s)" in (
            cluster.status.reason.message
        )

        async def counted() -> list[Event]:
            events = [e for e in (await alice.list(Event, "a")).items if e.type == "Warning"]
            return events if events and events[0].count == len(creates) else []

        warnings = await wait_for(counted, timeout=10, interval=0.1, message="counted")
        assert [e.reason for e in warnings] == ["InfrastructureFailed"]
