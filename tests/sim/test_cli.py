"""`python -m shoal.sim` serving clusters and injecting faults, and SimThread."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from shoal.sim.server import SimThread
from tests.util import free_ports, wait_for

pytestmark = pytest.mark.integration


async def test_cli_serve_and_fault(tmp_path: Path) -> None:
    port = free_ports(1)  # the sim process binds it later
    out = tmp_path / "kc"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "shoal.sim", "--clusters", "2", "--nodes", "4", "--port",
        str(port), "--out", str(out), "--name-prefix", "c", "--pod-start-delay", "0.1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    admin = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=admin) as client:
            async def up() -> bool:
                try:
                    return (await client.get("/admin/clusters")).status_code == 401
                except httpx.TransportError:
                    return False
            await wait_for(up, timeout=15, message="sim CLI serving")
            # the admin API answers its token's holder only: the one the sim wrote in --out
            token = (out / "sim.token").read_text().strip()
            client.headers["Authorization"] = f"Bearer {token}"
            refused = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shoal.sim", "list", "--admin", admin,
                "--data-dir", str(tmp_path), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            _, error = await refused.communicate()
            assert refused.returncode == 1 and b"error 401" in error, error
            kubeconfig = yaml.safe_load((out / "c1.yaml").read_text())
            assert kubeconfig["clusters"][0]["cluster"]["server"] == f"{admin}/clusters/c1"
            fault = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shoal.sim", "fault", "c1", "--admin", admin,
                "--token", token, "--node", "n-2", "--not-ready", stdout=asyncio.subprocess.PIPE)
            text, _ = await fault.communicate()
            assert fault.returncode == 0, text
            assert b'"n-2":{"not_ready":true}' in text
            listing = {c["name"]: c for c in (await client.get("/admin/clusters")).json()[
                "clusters"]}
            assert listing["c1"]["nodes"] == 4 and listing["c1"]["ready_nodes"] == 3
            assert listing["c0"]["ready_nodes"] == 4
            slow = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shoal.sim", "fault", "c1", "--admin", admin,
                "--token", token, "--latency", "0.25", stdout=asyncio.subprocess.PIPE)
            text, _ = await slow.communicate()
            assert slow.returncode == 0 and b'"latency":0.25' in text, text
            listing = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shoal.sim", "list", "--admin", admin,
                stdout=asyncio.subprocess.PIPE, env={**os.environ, "SHOAL_SIM_TOKEN": token})
            text, _ = await listing.communicate()
            lines = dict(line.split("\t", 1) for line in text.decode().splitlines())
            assert lines["c0"].endswith("\tfaults=none"), lines
            assert lines["c1"].endswith("\tfaults=latency=0.25s,n-2:not_ready"), lines
            data = tmp_path / "data"  # as `shoal up` leaves it: DATA_DIR/sim.token
            data.mkdir()
            (data / "sim.token").write_text(token + "\n")
            wrong = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shoal.sim", "fault", "c1", "--admin", admin,
                "--data-dir", str(data), "--node", "n-9", "--not-ready",
                stderr=asyncio.subprocess.PIPE)
            _, error = await wrong.communicate()
            assert wrong.returncode == 1
            assert error.decode().strip() == "error 404: no node 'n-9' in c1"  # one line
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


def test_sim_thread_for_sync_callers() -> None:
    with SimThread(clusters=["t"], nodes=2) as sim:
        r = httpx.get(f"{sim.url}/clusters/t/api/v1/nodes")
        assert len(r.json()["items"]) == 2
        sim.call(sim.clusters.set_unreachable, "t", True)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{sim.url}/clusters/t/api/v1/nodes")
