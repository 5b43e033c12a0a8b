"""Fleet pods are covered by RBAC through the kinds table, as every kind: tenants see theirs."""

from __future__ import annotations

import pytest

from tests.security.conftest import Secured, secured  # noqa: F401  (the secured API fixture)

pytestmark = pytest.mark.integration


def body(name: str) -> dict[str, object]:
    container = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}
    return {"api": "scheduling", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [container]}}


async def test_tenants_reach_only_their_fleet_pods(secured: Secured) -> None:  # noqa: F811
    alice, bob = secured["alice"], secured["bob"]
    assert (await alice.post("/scheduling/namespaces/a/pods", json=body("p"))).status_code == 200
    assert (await alice.post("/scheduling/namespaces/b/pods", json=body("p"))).status_code == 403
    assert (await bob.get("/scheduling/namespaces/a/pods/p")).status_code == 403
    status = {"status": {"phase": "Scheduled"}}
    assert (await bob.put("/scheduling/namespaces/a/pods/p/status", json=status)).status_code == 403
    listed = (await bob.get("/scheduling/pods")).json()["items"]
    assert [p["metadata"]["namespace"] for p in listed] == []
    assert (await secured.anonymous.get("/scheduling/pods")).status_code == 401
