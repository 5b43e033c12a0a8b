"""A 5,000-node cluster starts in a couple of seconds and kubectl lists it promptly."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from shoal.sim.server import start_sim
from tests.sim.conftest import KUBECTL, Kubectl

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def test_5000_nodes(tmp_path: Path) -> None:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    before = rss_mib()
    t0 = time.perf_counter()
    sim = await start_sim(clusters=["big"], nodes=5000, out_dir=tmp_path / "kc")
    started = time.perf_counter() - t0
    try:
        print(f"\n5000-node sim: start {started:.2f} s, RSS {rss_mib():.0f} MiB "
              f"(+{rss_mib() - before:.0f} MiB)")
        assert started < 5
        kubectl = Kubectl(tmp_path / "kc" / "big.yaml", tmp_path / "cache")
        t1 = time.perf_counter()
        r = await kubectl.run("get", "nodes", "--no-headers", timeout=30)
        took = time.perf_counter() - t1
        print(f"kubectl get nodes: {took:.2f} s")
        lines = r.out.strip().splitlines()
        assert len(lines) == 5000
        assert all(line.split()[1] == "Ready" for line in lines)
        assert took < 10
    finally:
        await sim.stop()
