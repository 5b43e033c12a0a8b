"""Krake 1.0.1's own code, run in its Python 3.8 virtualenv (``scripts/krake-env``).

Where no Python 3.8 exists the Krake tests skip with one line; CI has one.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

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
