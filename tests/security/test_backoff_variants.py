"""A tenant's IM that fails in other ways than refusing the create still gets one call per
back-off step, under the security ``shoal up`` ships and the controller's shipped settings.

alice names her own IM (namespace ``a``). It accepts every create, then either forgets
the infrastructure at once (its state and its list answer as if it never existed) or
answers a create with a body that names no infrastructure. Each attempt is counted on
the IM itself.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest
from aiohttp import web

from shoal.model.kubernetes import Cluster, ClusterState
from shoal.testing.wait import wait_for
from tests.infrastructure.conftest import template
from tests.infrastructure.fake_im import FakeIm
from tests.infrastructure.test_tenant_backoff import (
    alice_and_parts,
    api_url,
    create_edge,
    creates_after_first,
)

pytestmark = pytest.mark.integration
__all__ = ["api_url"]  # the secured API fixture


class ForgetfulIm(FakeIm):
    """Answers a create with a new id, and keeps nothing: the id is unknown at once."""

    async def _create(self, request: web.Request) -> web.Response:
        return web.json_response({"uri": self._uri(f"gone-{len(self.calls)}")})


class GarbledIm(FakeIm):
    """Answers a create with 200 and a body that names no infrastructure."""

    async def _create(self, request: web.Request) -> web.Response:
        return web.json_response({"not": "an uri"})


@pytest.mark.parametrize("make", [ForgetfulIm, GarbledIm], ids=["forgets", "garbled"])
async def test_a_build_that_fails_another_way_backs_off(
    api_url: str, make: Callable[[], FakeIm]
) -> None:
    async with alice_and_parts(api_url, make) as (im, alice):
        await create_edge(alice)
        await creates_after_first(im)

        async def failed() -> Cluster | None:
            cluster = await alice.get(Cluster, "edge-1", "a")
            return cluster if cluster.status.state is ClusterState.FAILED else None

        cluster = await wait_for(failed, timeout=10, interval=0.1, message="FAILED")
        assert cluster.status.reason is not None
        assert "next in" in cluster.status.reason.message


async def test_changing_the_template_over_and_over_waits_between_tries(api_url: str) -> None:
    """A new ``spec.tosca`` brings the retry forward, never nearer than ``retry_delay``
    (2 s) to the last try: flipping between two templates is not a flood. Labels
    changed over and over bring nothing forward."""
    async with alice_and_parts(api_url) as (im, alice):
        im.refuse_create = (500, "no")
        await create_edge(alice)

        async def first() -> bool:
            return im.count("POST") >= 1

        await wait_for(first, timeout=30, interval=0.05, message="the first create")
        loop = asyncio.get_running_loop()
        end = loop.time() + 5.0
        flips = 0
        while loop.time() < end:
            cluster = await alice.get(Cluster, "edge-1", "a")
            cluster.spec.tosca = template(workers=2 + flips % 2 + 1)
            cluster.metadata.labels["flip"] = str(flips)
            await alice.update(cluster)
            flips += 1
            await asyncio.sleep(0.1)
        creates = [c.when for c in im.calls if c.method == "POST"]
        assert flips >= 10
        gaps = [round(b - a, 2) for a, b in itertools.pairwise(creates)]
        assert len(creates) <= 4, gaps  # 0, 2, 4 s and the one at 5 s at most
        assert all(b - a >= 2 - 0.05 for a, b in itertools.pairwise(creates)), gaps


async def test_many_failing_clusters_each_back_off_and_delete_at_once(api_url: str) -> None:
    """Four clusters on a refusing IM: each gets one create per back-off step, and deleting
    them while they fail removes them at once (nothing was made at the provider)."""
    async with alice_and_parts(api_url) as (im, alice):
        im.refuse_create = (500, "no")
        names = [f"edge-{n}" for n in range(4)]
        for name in names:
            await create_edge(alice, name)

        async def all_tried() -> bool:
            return im.count("POST") >= len(names)

        await wait_for(all_tried, timeout=30, interval=0.05, message="a create each")
        since = min(c.when for c in im.calls if c.method == "POST")
        await asyncio.sleep(5.0)
        creates = [c.when for c in im.calls if c.method == "POST"]
        # each cluster at 0 and 2 s at most within 5 s of the first create
        assert len([t for t in creates if t - since < 5.0]) <= 2 * len(names), len(creates)

        for name in names:
            await alice.delete(Cluster, name, "a")

        async def gone() -> bool:
            return not [c for c in (await alice.list(Cluster, "a")).items
                        if c.metadata.name in names]  # fmt: skip

        await wait_for(gone, timeout=15, interval=0.1, message="the clusters deleted")
        assert im.infrastructures == {}
