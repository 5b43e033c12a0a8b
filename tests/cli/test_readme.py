"""README's quick start runs as written, in order, and each command prints what README shows.

``./scripts/up`` is ``shoal up`` on a free port, started in a fresh directory
that has the repository's ``docs`` (the sample files), so nothing of a
developer's checkout (``./data``) is touched; the commands of the second
terminal then run in a shell there, with ``.venv/bin`` on the PATH as
``source .venv/bin/activate`` puts it. A command is run again for a while
until its output matches, as a reader would while the fleet settles; ages
(``1m``, ``5s``) match any age.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import process
from tests.util import up_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
AGE = re.compile(r"^\d+[smhd]$")


def _blocks(kind: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{kind}\n(.*?)```", text, re.S)


def session() -> list[tuple[str, list[str]]]:
    """The quick start's second terminal: (command, expected output lines)."""
    steps: list[tuple[str, list[str]]] = []
    for line in _blocks("console")[0].splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def same(expected: list[str], actual: list[str]) -> bool:
    """Line by line, word by word; an age in README matches any age."""
    if len(expected) != len(actual):
        return False
    for want, got in zip(expected, actual, strict=True):
        words, found = want.split(), got.split()
        if len(words) != len(found):
            return False
        for w, f in zip(words, found, strict=True):
            if w != f and not (AGE.match(w) and AGE.match(f)):
                return False
    return True


async def _shell(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode().splitlines()


def test_readme_quick_start_is_parsed() -> None:
    steps = session()
    assert steps[0][0] == "source .venv/bin/activate"
    assert any(command.startswith("shoal kube app create web") for command, _ in steps)
    assert _blocks("sh")[0].strip() == "./scripts/up"


@pytest.mark.integration
@pytest.mark.slow
async def test_readme_quick_start(tmp_path: Path) -> None:
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    bin_dir = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path),  # no ~/.config/shoal of the developer's
        "COLUMNS": "200",
    }
    port = up_port()
    up = await process("up", "--port", str(port), env=env, cwd=tmp_path)
    try:
        config = tmp_path / "data" / "security" / "config.yaml"
        await wait_for(config.exists, timeout=90, message="shoal up's banner")
        for command, expected in session():
            if command == "source .venv/bin/activate":
                continue  # the PATH above has .venv/bin

            async def matches(command: str = command, expected: list[str] = expected) -> bool:
                code, lines = await _shell(command, tmp_path, env)
                assert code == 0, (command, lines)
                if same(expected, lines):
                    return True
                print("not yet:", command, lines)  # shown when it never matches
                return False

            await wait_for(matches, timeout=30, interval=1.0, message=command)
    finally:
        up.send_signal(2)
        out, _ = await asyncio.wait_for(up.communicate(), 30)
    banner = out.decode()
    for line in _blocks("text")[0].splitlines():
        assert line.strip() in banner, (line, banner)
    assert "Traceback" not in banner
