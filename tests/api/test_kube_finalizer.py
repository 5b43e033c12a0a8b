"""``shoal api --kube-finalizer``: new applications carry the kube controller's finalizer from
their creation on, by every way they are created; without it, nothing is added."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from shoal.model.kubernetes import KUBE_FINALIZER
from shoal.testing import builders, shipped
from tests.api.test_creates import app
from tests.util import api_server

APPS = "/kubernetes/namespaces/a/applications"


async def _http(kube_finalizer: bool) -> AsyncIterator[httpx.AsyncClient]:
    async with api_server(kube_finalizer=kube_finalizer) as server:
        admin = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
        async with httpx.AsyncClient(base_url=server.url, headers=admin) as http:
            yield http


@pytest.fixture
async def given() -> AsyncIterator[httpx.AsyncClient]:
    async for http in _http(True):
        yield http


@pytest.fixture
async def plain() -> AsyncIterator[httpx.AsyncClient]:
    async for http in _http(False):
        yield http


def _finalizers(body: dict[str, Any]) -> list[str]:
    return list(body["metadata"].get("finalizers") or [])


async def test_every_way_of_creating_gives_the_finalizer(given: httpx.AsyncClient) -> None:
    single = await given.post(APPS, json=app("one"))
    assert single.status_code == 200, single.text
    assert _finalizers(single.json()) == [KUBE_FINALIZER]
    stored = (await given.get(f"{APPS}/one")).json()
    assert _finalizers(stored) == [KUBE_FINALIZER]

    # the user's own finalizers stay, in front; the kube controller's is not doubled
    own = app("two")
    own["metadata"]["finalizers"] = ["example.com/audit", KUBE_FINALIZER]
    answer = await given.post(APPS, json=own)
    assert _finalizers(answer.json()) == ["example.com/audit", KUBE_FINALIZER]
    mine = app("three")
    mine["metadata"]["finalizers"] = ["example.com/audit"]
    answer = await given.post(APPS, json=mine)
    assert _finalizers(answer.json()) == ["example.com/audit", KUBE_FINALIZER]

    batch = await given.post("/kubernetes/applications", json={"items": [app("four"), app("five")]})
    results = batch.json()["results"]
    assert [r["status"] for r in results] == [200, 200], results
    for name in ("four", "five"):
        assert _finalizers((await given.get(f"{APPS}/{name}")).json()) == [KUBE_FINALIZER]

    # a dry run answers what would be stored
    dry = await given.post(APPS, params={"dry_run": "true"}, json=app("six"))
    assert _finalizers(dry.json()) == [KUBE_FINALIZER]
    assert (await given.get(f"{APPS}/six")).status_code == 404


async def test_only_applications_get_it(given: httpx.AsyncClient) -> None:
    cluster = builders.cluster("c").model_dump(mode="json")
    cluster["metadata"]["namespace"] = "a"
    answer = await given.post("/kubernetes/namespaces/a/clusters", json=cluster)
    assert answer.status_code == 200, answer.text
    assert _finalizers(answer.json()) == []


async def test_a_deletion_waits_for_the_kube_controller(given: httpx.AsyncClient) -> None:
    """With the finalizer, deleting marks the application; its removal is the controller's."""
    assert (await given.post(APPS, json=app("one"))).is_success
    assert (await given.delete(f"{APPS}/one")).is_success
    marked = (await given.get(f"{APPS}/one")).json()
    assert marked["metadata"]["deleted"] is not None
    assert _finalizers(marked) == [KUBE_FINALIZER]


async def test_without_the_option_nothing_is_added(plain: httpx.AsyncClient) -> None:
    answer = await plain.post(APPS, json=app("one"))
    assert _finalizers(answer.json()) == []
    assert (await plain.delete(f"{APPS}/one")).is_success
    assert (await plain.get(f"{APPS}/one")).status_code == 404
