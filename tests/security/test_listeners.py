"""TLS on the other listeners: the simulated clusters and the cluster agent."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx

from shoal.agent.server import start_agent
from shoal.machinery.tls import Tls, issue, make_ca, write_pair
from shoal.sim.server import start_sim


def _pki(tmp_path: Path) -> tuple[Tls, bytes, ssl.SSLContext]:
    ca = make_ca()
    write_pair(tmp_path, "ca", ca)
    key, cert = write_pair(tmp_path, "server", issue(*ca, "shoal-sim", hosts=("127.0.0.1",)))
    return Tls(cert, key), ca[1], ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))


async def test_sim_and_agent_over_tls(tmp_path: Path) -> None:
    tls, ca_pem, trust = _pki(tmp_path)
    sim = await start_sim(clusters=1, nodes=2, tls=tls, ca=ca_pem)
    try:
        kubeconfig = sim.clusters.kubeconfig("sim-0")
        cluster = kubeconfig["clusters"][0]["cluster"]
        assert cluster["server"].startswith("https://")
        assert cluster["certificate-authority-data"]
        token = kubeconfig["users"][0]["user"]["token"]
        headers = {"authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(verify=trust, headers=headers) as client:
            answer = await client.get(f"{cluster['server']}/api/v1/nodes")
            assert answer.status_code == 200 and len(answer.json()["items"]) == 2
        agent = await start_agent(kubeconfig, tls=tls)
        try:
            assert agent.url.startswith("https://")
            async with httpx.AsyncClient(verify=trust) as client:
                assert (await client.get(f"{agent.url}/healthz")).status_code == 200
        finally:
            await agent.stop()
    finally:
        await sim.stop()
