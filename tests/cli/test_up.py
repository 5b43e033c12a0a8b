"""``shoal up`` starts everything and places the demo application (the README's first command)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.util import free_port


@pytest.mark.integration
async def test_up_places_the_demo(tmp_path: Path) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shoal.cli.main",
        "up",
        "--port",
        str(port),
        "--data-dir",
        str(tmp_path),
        "--exit-after-demo",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
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
