"""Fixtures: an in-process sim fleet on the test's event loop, and kubectl run as a subprocess."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shoal.sim.server import SimServer

KUBECTL = shutil.which("kubectl")


@pytest.fixture
def sim_options(tmp_path: Path) -> dict[str, Any]:
    """Two clusters, their kubeconfigs in ``tmp_path/kubeconfigs`` for kubectl."""
    return dict(clusters=["alpha", "beta"], nodes=3, pod_start_delay=0.1, job_duration=0.3,
                out_dir=tmp_path / "kubeconfigs")


@dataclass
class KubectlResult:
    code: int
    out: str
    err: str


class Kubectl:
    """Runs kubectl against one sim cluster without blocking the event loop."""

    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.kubeconfig = kubeconfig
        self.env = dict(os.environ, KUBECACHEDIR=str(cache), HOME=str(cache))

    async def run(self, *args: str, timeout: float = 20, stdin: str | None = None,
                  check: bool = True) -> KubectlResult:
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(self.kubeconfig), *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env,
        )
        out, err = bytearray(), bytearray()

        async def pump(stream: asyncio.StreamReader | None, buf: bytearray) -> None:
            assert stream is not None
            while chunk := await stream.read(65536):
                buf.extend(chunk)

        readers = [asyncio.create_task(pump(proc.stdout, out)),
                   asyncio.create_task(pump(proc.stderr, err))]
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin.encode())
            await proc.stdin.drain()
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        await asyncio.gather(*readers)
        result = KubectlResult(proc.returncode or 0, out.decode(), err.decode())
        if check and result.code != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.err}{result.out}")
        return result


@pytest.fixture
def kubectl(sim: SimServer, tmp_path: Path) -> Kubectl:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    return Kubectl(tmp_path / "kubeconfigs" / "alpha.yaml", tmp_path / "kube-cache")
