"""``shoal up`` starts everything and places the demo application (the README's first command),
serves each component's metrics, and starts again on its data directory without a traceback,
showing what is stored."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cli.conftest import process
from tests.util import up_port, wait_for

ENV = {"COLUMNS": "200", "PATH": "/usr/bin:/bin"}
ROOT = Path(__file__).resolve().parents[2]


async def _up(data: Path, port: int, *args: str) -> asyncio.subprocess.Process:
    return await process("up", "--port", str(port), "--data-dir", str(data), *args, env=ENV)


async def _until_up(proc: asyncio.subprocess.Process, data: Path) -> None:
    """Until ``shoal up`` prints its banner (the CLI's configuration is written); when it
    exits first, the failure shows what it printed."""
    config = data / "security" / "config.yaml"
    await wait_for(
        lambda: config.exists() or proc.returncode is not None,
        timeout=60,
        message="shoal up's banner",
    )
    if proc.returncode is not None:
        out, _ = await proc.communicate()
        raise AssertionError(f"shoal up exited with {proc.returncode}:\n{out.decode()[-4000:]}")


async def _shoal(data: Path, *args: str) -> str:
    env = {**ENV, "SHOAL_CONFIG": str(data / "security" / "config.yaml")}
    proc = await process(*args, env=env)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()
    return out.decode()


@pytest.mark.integration
async def test_up_places_the_demo(tmp_path: Path) -> None:
    port = up_port()
    proc = await _up(tmp_path, port, "--exit-after-demo")
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text
    assert f"Shoal API on http://127.0.0.1:{port}" in text
    assert "Scheduler" in text
    # location in (DE, FR): sim-1 (DE) or sim-2 (FR), never sim-3 (FI); the best score wins.
    assert "Application demo (constraint: location in (DE, FR)) → sim-2" in text, text
    assert "2/3 clusters available: 1 label location in (DE, FR)" in text
    assert (tmp_path / "shoal.db").exists()
    assert (tmp_path / "kubeconfigs" / "sim-1.yaml").exists()
    sim_url = (tmp_path / "sim.url").read_text().strip()
    assert f"Simulator admin API on {sim_url}" in text


@pytest.mark.integration
async def test_up_in_one_process_places_the_demo(tmp_path: Path) -> None:
    """``--single-process``: the same components from the same table, on one event loop."""
    port = up_port()
    proc = await _up(tmp_path, port, "--single-process", "--exit-after-demo")
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text
    assert f"Shoal API on http://127.0.0.1:{port}" in text
    controllers = re.search(r"Controllers: (.*)", text)
    assert controllers is not None, text
    names = controllers.group(1).split(", ")
    assert names == [
        "Scheduler", "KubeController", "ClusterObserver", "GarbageCollector",
        "RescheduleTaskController", "InfrastructureController",
    ]  # fmt: skip
    assert "Application demo (constraint: location in (DE, FR)) → sim-2" in text, text


@pytest.mark.integration
@pytest.mark.slow
async def test_up_restarts_with_what_is_stored(tmp_path: Path) -> None:
    """Labels changed by the user and the placement survive a restart, and the banner shows
    them; nothing it recovers from prints a traceback."""
    port = up_port()
    first = await _up(tmp_path, port)
    await _until_up(first, tmp_path)
    await _shoal(tmp_path, "kube", "cluster", "update", "sim-1", "-l", "location=US")
    await _shoal(tmp_path, "kube", "cluster", "update", "sim-2", "-l", "tier=gold")
    # The simulator's admin API is found in the data directory, with no flag.
    listed = await _shoal(tmp_path, "sim", "list", "--data-dir", str(tmp_path))
    assert "sim-2\tnodes=5" in listed
    placed = await _shoal(tmp_path, "get", "app", "demo")
    assert "sim-2" in placed, placed
    # Each component process serves its own metrics: the scheduler on the API port + 1,
    # to scrapes with the token shoal up made for them.
    scrape = (tmp_path / "security" / "metrics.token").read_text().strip()
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {scrape}"}) as http:
        scraped = (await http.get(f"http://127.0.0.1:{port + 1}/metrics")).text
    bound = re.search(r'^shoal_scheduler_attempts_total\{result="bound"\} (\S+)$', scraped, re.M)
    assert bound is not None and float(bound[1]) >= 1, scraped
    first.send_signal(signal.SIGINT)
    out, _ = await asyncio.wait_for(first.communicate(), 30)
    assert "Traceback" not in out.decode(), out.decode()
    api_log = (tmp_path / "logs" / "api.log").read_text()
    assert "Unclosed client session" not in api_log, api_log  # the first start's dry runs
    assert f"scheduler http://127.0.0.1:{port + 1}/metrics" in out.decode(), out.decode()

    again = await _up(tmp_path, port, "--exit-after-demo")
    out, _ = await asyncio.wait_for(again.communicate(), 60)
    text = out.decode()
    assert again.returncode == 0, text
    assert "Traceback" not in text and "AssertionError" not in text, text
    assert "location=US" in text and "location=FR, tier=gold" in text, text  # stored labels
    assert "Application demo (constraint: location in (DE, FR)) → sim-2 (stored)" in text
    assert "1/3 clusters available: 2 label location in (DE, FR)" in text


@pytest.mark.integration
@pytest.mark.slow
async def test_up_builds_a_cluster_on_a_cloud_as_docs_clouds_shows(tmp_path: Path) -> None:
    """docs/clouds.md under ``shoal up``: create on the DE cloud, ONLINE, kubectl sees its two
    nodes, an application runs there; deleted, the simulated cluster is gone."""
    port = up_port()
    up = await _up(tmp_path, port)
    try:
        await _until_up(up, tmp_path)
        example = str(ROOT / "docs" / "examples" / "cluster.tosca.yaml")
        await _shoal(tmp_path, "kube", "cluster", "create", "edge-1", "-f", example,
                     "--cloud-constraint", "location is DE", "-l", "site=edge")  # fmt: skip

        async def online() -> dict[str, Any] | None:
            text = await _shoal(tmp_path, "kube", "cluster", "get", "edge-1", "-o", "json")
            cluster: dict[str, Any] = json.loads(text)
            return cluster if cluster["status"]["state"] == "ONLINE" else None

        cluster = await wait_for(online, timeout=60, interval=0.2, message="edge-1 ONLINE")
        assert cluster["status"]["scheduled_to"]["name"] == "cloud-de"
        kubeconfig = tmp_path / "edge-1.yaml"
        kubeconfig.write_text(yaml.safe_dump(cluster["spec"]["kubeconfig"]))
        nodes = await _kubectl(kubeconfig, "get", "nodes", "-o", "name")
        assert nodes.split() == ["node/n-0", "node/n-1"]

        # shoal up's simulated clusters look like fresh ones: kube-system runs DNS and a
        # proxy per node, which kubectl lists under its NAMESPACE header
        async def fresh() -> bool:
            table = await _kubectl(kubeconfig, "get", "pods", "--all-namespaces")
            rows = [line.split() for line in table.splitlines()]
            running = [row[1] for row in rows[1:] if row[0] == "kube-system" and "Running" in row]
            return rows[0][0] == "NAMESPACE" and sum(
                name.startswith("kube-proxy-") for name in running
            ) == 2 and sum(name.startswith("coredns-") for name in running) == 2

        await wait_for(fresh, timeout=60, interval=0.2, message="kube-system's pods on edge-1")
        await _shoal(tmp_path, "kube", "app", "create", "web", "-f",
                     str(ROOT / "docs" / "examples" / "web.yaml"), "-L", "site is edge")

        async def running() -> bool:
            return "edge-1" in await _shoal(tmp_path, "get", "app", "web")

        await wait_for(running, timeout=60, interval=0.2, message="web on edge-1")
        await _shoal(tmp_path, "kube", "app", "delete", "web")
        await _shoal(tmp_path, "kube", "cluster", "delete", "edge-1")
        sim = cluster["status"]["cluster_id"]

        async def removed() -> bool:
            listed = await _shoal(tmp_path, "sim", "list", "--data-dir", str(tmp_path))
            return sim not in listed and "edge-1" not in await _shoal(tmp_path, "get", "clusters")

        await wait_for(removed, timeout=60, interval=0.2, message="edge-1 removed")
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(up.communicate(), 30)
    assert "Traceback" not in out.decode(), out.decode()


async def _kubectl(kubeconfig: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()
    return out.decode()
