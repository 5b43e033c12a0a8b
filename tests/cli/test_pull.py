"""What the CLI shows of a pull cluster: its mode, its agent's version, its last heartbeat."""

from __future__ import annotations

import httpx

from shoal.api.server import ApiServer
from shoal.testing import shipped
from shoal.testing.builders import kubeconfig
from tests.cli.conftest import Shoal, cli_ok


async def test_a_pull_cluster_in_lists_and_describe(api: ApiServer, shoal: Shoal) -> None:
    made = await cli_ok(shoal, "kube cluster join-token create --ttl 30m")
    token = made.stdout.splitlines()[0]
    assert "shoal join" in made.output and "--ca-hash" in made.output
    async with httpx.AsyncClient(base_url=api.url) as anonymous:
        joined = await anonymous.post("/kubernetes/join", json={"token": token, "name": "edge"})
        assert joined.status_code == 200, joined.text
        own = {"authorization": f"Bearer {joined.json()['credential']}"}
        beat = {"status": {"heartbeat": "2026-01-01T00:00:00Z", "agent_version": "9.9.9"}}
        written = await anonymous.patch("/kubernetes/namespaces/default/clusters/edge/status",
                                        json=beat, headers=own)  # fmt: skip
        assert written.status_code == 200, written.text
    async with httpx.AsyncClient(base_url=api.url) as admin:
        admin.headers["authorization"] = f"Bearer {shipped.token('admin')}"
        push = await admin.post("/kubernetes/namespaces/default/clusters", json={
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": "push", "namespace": "default"},
            "spec": {"kubeconfig": kubeconfig("push")}})  # fmt: skip
        assert push.status_code == 200, push.text
    wide = (await cli_ok(shoal, "get clusters -o wide")).output.splitlines()
    header, rows = wide[0].split(), {line.split()[0]: line.split() for line in wide[1:]}
    mode = header.index("MODE")
    assert rows["edge"][mode] == "pull" and rows["push"][mode] == "push"
    assert "9.9.9" in rows["edge"]
    page = (await cli_ok(shoal, "kube cluster describe edge")).output
    assert "pull (its agent dials the hub)" in page
    assert "Agent:" in page and "9.9.9" in page
    assert "Last heartbeat:" in page and "2026-01-01T00:00:00Z" in page
    push_page = (await cli_ok(shoal, "kube cluster describe push")).output
    assert "push (the hub dials it with its kubeconfig)" in push_page
    assert "Last heartbeat" not in push_page

