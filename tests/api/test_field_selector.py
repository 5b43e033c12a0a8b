"""``field_selector`` on lists and watches: any field by its dotted path, ``=`` and ``!=``."""

from __future__ import annotations

import asyncio

import httpx

from tests.api.conftest import start_watch
from tests.api.samples import SAMPLES
from tests.api.test_crud import create

APPLICATION = next(s for s in SAMPLES if s.plural == "applications")


async def test_lists_and_watches_keep_the_matching_objects(http: httpx.AsyncClient) -> None:
    watch = await start_watch(
        http, APPLICATION.collection(), field_selector="metadata.labels.env=prod"
    )
    for name, env in (("a", "prod"), ("b", "dev"), ("c", "prod")):
        await create(http, APPLICATION, name, env=env)

    async def names(selector: str) -> list[str]:
        response = await http.get(APPLICATION.collection(), params={"field_selector": selector})
        assert response.status_code == 200, response.text
        return [i["metadata"]["name"] for i in response.json()["items"]]

    assert await names("metadata.labels.env=prod") == ["a", "c"]
    assert await names("metadata.labels.env!=prod,metadata.name!=x") == ["b"]
    assert await names("metadata.name==c") == ["c"]
    assert await names("status.scheduled_to.name=") == ["a", "b", "c"]  # missing reads ""
    assert await names("status.scheduled_to.name=edge-1") == []
    assert await names("metadata.labels=prod") == []  # an object equals no value
    for _ in range(50):
        if len(watch.events) >= 2:
            break
        await asyncio.sleep(0.1)
    await watch.stop()
    assert [e["object"]["metadata"]["name"] for e in watch.events] == ["a", "c"]

    for bad in ("name", "=x", "a..b=1", "status.state<3"):
        response = await http.get(APPLICATION.collection(), params={"field_selector": bad})
        assert response.status_code == 400, bad
        assert response.json()["errors"][0]["field"] == "field_selector"
