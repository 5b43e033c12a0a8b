"""``shoal`` processes for the scale-out tests: started as the operator would, killed at will."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.util import free_port, wait_for

ROOT = str(Path(__file__).resolve().parents[2])


def spawn_shoal(*args: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    """``python -m shoal.cli.main ARGS`` with no user config; output to ``log`` if given."""
    env = dict(os.environ, PYTHONPATH=ROOT, SHOAL_CONFIG=os.devnull)
    env.pop("SHOAL_API", None)
    env.pop("SHOAL_STORE", None)
    out = open(log, "ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "shoal.cli.main", *args],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, SIGKILL after a few seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL, as a crash would."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()


class ApiProcess:
    """``shoal api --store URL --port N`` in a process of its own."""

    def __init__(self, store: str, log: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = spawn_shoal(
            "api", "--store", store, "--port", str(self.port), "--log-level", "warning", log=log
        )

    async def wait_ready(self, timeout: float = 30.0) -> None:
        async def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"API exited with {self.proc.returncode}")
            try:
                async with httpx.AsyncClient() as http:
                    return (await http.get(self.url + "/readyz")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_for(ready, timeout=timeout, interval=0.1, message=f"API on {self.url}")

    def stop(self) -> None:
        stop(self.proc)
