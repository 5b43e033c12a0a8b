"""CLI start-up: ``shoal --help`` and ``shoal get clusters``, beside ``kubectl version --client``.

Each command runs N times (default 20) as a whole process, as a user's shell
starts it; the figure is the wall time from start to exit, median and spread.
``shoal get clusters`` asks a ``shoal api`` that this script starts on a free
port (SQLite in a temp dir) with a few clusters in it.

    .venv/bin/python bench/cli.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shoal.testing.launch import ApiProcess, shoal_env

SHOAL = str(Path(sys.executable).parent / "shoal")


def timed(command: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Wall seconds of each run (one warm-up run first, not counted)."""
    seconds = []
    for index in range(runs + 1):
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, check=False)
        took = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-500:]}")
        if index:
            seconds.append(took)
    return seconds


def row(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    median = statistics.median(ms)
    return f"{name:<32} {median:8.1f} {ms[0]:8.1f} {ms[-1]:8.1f}"


async def populate(url: str, count: int) -> None:
    from shoal.client.rest import ShoalClient
    from shoal.model.base import Metadata
    from shoal.model.kubernetes import Cluster, ClusterSpec
    from shoal.testing.builders import kubeconfig

    async with ShoalClient(url) as client:
        for i in range(count):
            metadata = Metadata(name=f"c{i}", namespace="default", labels={"n": str(i)})
            spec = ClusterSpec(kubeconfig=kubeconfig(f"c{i}"))
            await client.create(Cluster(metadata=metadata, spec=spec))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--clusters", type=int, default=10)
    args = parser.parse_args()

    env = {**shoal_env(), "COLUMNS": "120"}
    with tempfile.TemporaryDirectory() as tmp:
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{Path(tmp) / 'bench.db'}", secured=False)
        try:
            asyncio.run(api.wait_ready())
            asyncio.run(populate(api.url, args.clusters))
            commands = {
                "shoal --help": [SHOAL, "--help"],
                "shoal get clusters": [SHOAL, "--api", api.url, "get", "clusters"],
                "shoal kube app list": [SHOAL, "--api", api.url, "kube", "app", "list"],
            }
            kubectl = shutil.which("kubectl")
            if kubectl:
                commands["kubectl version --client"] = [kubectl, "version", "--client"]
            print(f"{args.runs} runs each, wall ms ({os.cpu_count()} cores)")
            print(f"{'command':<32} {'median':>8} {'min':>8} {'max':>8}")
            for name, command in commands.items():
                print(row(name, timed(command, args.runs, env)))
        finally:
            api.stop()


if __name__ == "__main__":
    main()
