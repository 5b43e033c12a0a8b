"""``shoal up`` starts one registered agent per sim cluster: a fleet pod is placed from the CLI."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.cli.test_up import _shoal, _until_up, _up
from tests.util import up_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_up_places_a_fleet_pod(tmp_path: Path) -> None:
    proc = await _up(tmp_path, up_port(), "--no-demo")
    try:
        await _until_up(proc, tmp_path)
        await _shoal(tmp_path, "fleet", "pod", "create", "web", "--image", "nginx",
                     "--cpu", "250m", "--memory", "64Mi")

        async def scheduled() -> str | None:
            out = await _shoal(tmp_path, "fleet", "pod", "get", "web", "-o", "json")
            return out if '"Scheduled"' in out else None

        found = await wait_for(scheduled, timeout=30, interval=0.5, message="pod scheduled")
        assert '"cluster": "sim-' in found
        explained = await _shoal(tmp_path, "fleet", "pod", "explain", "web")
        assert "Scheduled on sim-" in explained and "sampling" in explained
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.communicate(), 30)
