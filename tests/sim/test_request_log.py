"""Each simulated cluster keeps a log of who called its Kubernetes API: the audit that
tells, from the member cluster's side, which process reached it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
import yaml

from shoal.client.kube import KubeCluster, api_client, user_agent
from shoal.testing.sim import running_sim

pytestmark = pytest.mark.integration


async def _log(url: str, headers: dict[str, str], name: str) -> list[dict[str, object]]:
    async with httpx.AsyncClient(base_url=url, headers=headers) as http:
        answer = await http.get(f"/admin/clusters/{name}/requests")
        assert answer.status_code == 200, answer.text
        return list(answer.json()["requests"])


async def test_the_log_names_each_caller_method_and_path(tmp_path: Path) -> None:
    async with running_sim(clusters=["edge", "other"], nodes=1) as sim:
        api = await api_client(sim.kubeconfig("edge"))
        try:
            kube = KubeCluster(api, b"")
            await kube.request("GET", "/api/v1/namespaces/default/configmaps")
        finally:
            await api.close()
        config = tmp_path / "edge.yaml"
        config.write_text(yaml.safe_dump(sim.kubeconfig("edge")))
        kubectl = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(config), "get", "nodes",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await kubectl.communicate()
        assert kubectl.returncode == 0, err.decode()

        log = await _log(sim.url, sim.admin_headers, "edge")
        ours = [r for r in log if r["path"] == "/api/v1/namespaces/default/configmaps"]
        assert f"(pid {os.getpid()})" in user_agent()
        assert [(r["method"], r["user_agent"]) for r in ours] == [
            ("GET", user_agent())
        ]
        assert any(str(r["user_agent"]).startswith("kubectl/") and r["path"] == "/api/v1/nodes"
                   for r in log), log  # fmt: skip
        assert all(str(r["peer"]).startswith("127.0.0.1:") for r in log)
        # a cluster nobody called has an empty log; the log is the admin's to read
        assert await _log(sim.url, sim.admin_headers, "other") == []
        async with httpx.AsyncClient(base_url=sim.url) as http:
            assert (await http.get("/admin/clusters/edge/requests")).status_code == 401

