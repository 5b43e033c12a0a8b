"""Krake 1.0.1's own code, run in its Python 3.8 virtualenv (``scripts/krake-env``).

Where no Python 3.8 exists the Krake tests skip with one line; CI has one.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.testing.launch import free_port
from tests.fixtures.etcd import etcd_available, running_etcd
from tests.krake.controllers import LOG

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def krake_python() -> str:
    done = subprocess.run(
        [str(ROOT / "scripts" / "krake-env")], capture_output=True, text=True, check=False
    )
    if done.returncode == 3:
        pytest.skip(done.stderr.strip() or "no Python 3.8: Krake's own code cannot run here")
    if done.returncode != 0:
        raise RuntimeError(f"scripts/krake-env failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


async def run_krake(python: str, script: str, *args: str, timeout: float = 180) -> list[Any]:
    """Run a script of this folder under Krake's Python; its JSON lines, parsed."""
    process = await asyncio.create_subprocess_exec(
        python,
        "-W",
        "ignore",
        str(HERE / script),
        *args,
        cwd=str(HERE),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode == 0, err.decode()[-3000:]
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def api_config(etcd_port: int, port: int) -> dict[str, Any]:
    """Krake's api.yaml: etcd, no TLS, anonymous access, every request allowed."""
    off = {"enabled": False}
    return {
        "port": port,
        "etcd": {"host": "127.0.0.1", "port": etcd_port, "retry_transactions": 1},
        "docs": {"problem_base_url": "http://example/problem.html"},
        "tls": {"enabled": False, "client_ca": "", "cert": "", "key": ""},
        "authentication": {
            "allow_anonymous": True,
            "strategy": {
                "keystone": {**off, "endpoint": "http://localhost:5000/v3"},
                "keycloak": {**off, "endpoint": "http://localhost:9080", "realm": "krake"},
                "static": {**off, "name": "system"},
            },
            "cors_origin": "*",
        },
        "authorization": "always-allow",
        "log": LOG,
    }


@pytest.fixture
def krake_api(krake_python: str, tmp_path: Path) -> Iterator[str]:
    if not etcd_available():
        pytest.skip("no etcd binary")
    with running_etcd(tmp_path / "etcd") as etcd:
        port = free_port()
        config = tmp_path / "api.yaml"
        config.write_text(json.dumps(api_config(etcd.client_port, port)))
        log = open(tmp_path / "krake-api.log", "wb")
        proc = subprocess.Popen(
            [krake_python, "-W", "ignore", "-m", "krake.api", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    httpx.get(f"{url}/core/roles", timeout=1)
                    break
                except httpx.HTTPError:
                    assert proc.poll() is None, (tmp_path / "krake-api.log").read_text()[-3000:]
                    time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()


@pytest.fixture
def sim_options(tmp_path: Path) -> dict[str, Any]:
    """Two clusters, ``de`` and ``fr``; their kubeconfigs in ``tmp_path/kubeconfigs``."""
    return dict(clusters=["de", "fr"], nodes=2, pod_start_delay=0.1,
                out_dir=tmp_path / "kubeconfigs")


async def configmaps(kubeconfigs: Path, cluster: str, namespace: str = "default") -> dict[str, str]:
    """The ConfigMaps in a sim cluster's ``namespace``, read by kubectl: name -> uid."""
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfigs / f"{cluster}.yaml"),
        "get",
        "configmaps",
        "-n",
        namespace,
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    items = json.loads(out)["items"]
    return {
        item["metadata"]["name"]: item["metadata"]["uid"]
        for item in items
        if item["metadata"]["name"] != "kube-root-ca.crt"
    }
