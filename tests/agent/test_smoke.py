from __future__ import annotations

import httpx

from tests.agent.conftest import pod


async def test_health_and_sample(http: httpx.AsyncClient) -> None:
    health = await http.get("/healthz")
    assert health.status_code == 200, health.text
    print(health.json())
    response = await http.post("/samples/random", json={"pod": pod(), "nodesToSampleBp": 10000})
    print(response.json())
    assert response.status_code == 200
    commit = await http.post("/agent/scheduling-decision",
                             json={"pod": pod(), "nodeName": "n-0"})
    print(commit.status_code, commit.json())
    assert commit.status_code == 201
