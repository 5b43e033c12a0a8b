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


def pull_lines() -> list[str]:
    """README's lines that join one more simulated cluster by hand in pull mode."""
    block = next(b for b in _blocks("sh") if "join-token create" in b)
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_readme_joins_a_pull_cluster_by_hand(tmp_path: Path) -> None:
    """``shoal up --tls --pull-clusters 1``, then README's lines as written: pull-1 and the
    cluster joined by hand both ONLINE in pull mode."""
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path),
           "COLUMNS": "200", "PYTHONPATH": str(ROOT)}  # fmt: skip
    up = await process("up", "--port", str(up_port()), "--tls", "--pull-clusters", "1",
                       "--clusters", "1", "--nodes", "2", "--no-demo", env=env,
                       cwd=tmp_path)  # fmt: skip
    started: list[asyncio.subprocess.Process] = []
    try:
        config = tmp_path / "data" / "security" / "config.yaml"
        await wait_for(lambda: config.exists() or up.returncode is not None, timeout=120,
                       message="shoal up's banner")  # fmt: skip
        assert up.returncode is None, "shoal up stopped"
        *background, listing = pull_lines()
        for line in background:  # each ends with "&": started, left running
            assert line.endswith("&"), line
            started.append(await asyncio.create_subprocess_exec(
                "bash", "-c", f"exec {line.removesuffix('&').strip()}", cwd=tmp_path, env=env,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL))  # fmt: skip
            if "shoal sim" in line:
                kubeconfig = tmp_path / "edge" / "edge-0.yaml"
                await wait_for(kubeconfig.exists, timeout=60, message="the sim's kubeconfig")

        async def both_online() -> bool:
            code, lines = await _shell(listing, tmp_path, env)
            assert code == 0, lines
            header = lines[0].split() if lines else []
            rows = {line.split()[0]: line.split() for line in lines[1:]}
            ready = [rows.get(name) for name in ("edge-1", "pull-1")]
            if "MODE" in header and all(
                row is not None and row[1] == "ONLINE" and row[header.index("MODE")] == "pull"
                for row in ready
            ):
                return True
            print("not yet:", lines)  # shown when it never matches
            return False

        await wait_for(both_online, timeout=120, interval=1.0, message="edge-1 and pull-1")
        assert (tmp_path / "edge" / "state" / "credential.json").exists()
    finally:
        for proc in started:
            proc.terminate()
            await proc.wait()
        if up.returncode is None:
            up.send_signal(2)
        out, _ = await asyncio.wait_for(up.communicate(), 60)
        print(out.decode()[-3000:])
