"""``shoal up`` runs each component in a process of its own: a killed child is restarted and
shown, each has its log, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.cli.conftest import process
from tests.util import up_port, wait_for

ENV = {"COLUMNS": "200", "PATH": "/usr/bin:/bin"}
COMPONENTS = {
    "api", "sim", "scheduler", "kube-controller", "cluster-observer", "garbage-collector",
    "reschedule-controller", "infrastructure-controller", "agents",
}  # fmt: skip


def children(parent: int) -> dict[str, int]:
    """Component → pid of the processes ``parent`` started (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid != parent or "-m" not in argv:
            continue
        module = argv[argv.index("-m") + 1]
        name = argv[argv.index("-m") + 2] if module == "shoal.cli.main" else "agents"
        found[name] = int(entry.name)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.integration
async def test_children_restarted_logged_and_stopped(tmp_path: Path) -> None:
    up = await process(
        "up", "--port", str(up_port()), "--data-dir", str(tmp_path), "--no-demo",
        "--clusters", "2", "--nodes", "2", env=ENV,
    )  # fmt: skip
    lines: list[str] = []

    async def read() -> None:
        assert up.stdout is not None
        async for line in up.stdout:
            lines.append(line.decode())

    reader = asyncio.create_task(read())
    seen: set[int] = set()
    try:
        await wait_for(
            lambda: any("Ctrl-C stops" in line for line in lines), timeout=60,
            message="shoal up's banner",
        )  # fmt: skip
        started = children(up.pid)
        assert set(started) == COMPONENTS, started
        seen.update(started.values())
        for name in COMPONENTS:
            assert (tmp_path / "logs" / f"{name}.log").exists(), name

        os.kill(started["kube-controller"], signal.SIGKILL)
        await wait_for(
            lambda: any("kube-controller restarted" in line for line in lines), timeout=20,
            message="the restart reported",
        )  # fmt: skip
        text = "".join(lines)
        assert "kube-controller killed by signal 9; restarting in" in text, text
        again = children(up.pid)
        assert again["kube-controller"] != started["kube-controller"]
        assert alive(again["kube-controller"])
        seen.update(again.values())
    finally:
        up.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(up.wait(), 30)
        await reader
    assert code == 0, "".join(lines)
    assert "Traceback" not in "".join(lines)
    assert not [pid for pid in seen if alive(pid)], "children left behind"
    # The API stops last: nothing the others still sent it failed on the way out.
    for name in COMPONENTS:
        log = (tmp_path / "logs" / f"{name}.log").read_text()
        assert "Traceback" not in log, f"{name}: {log[-2000:]}"
