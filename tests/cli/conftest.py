"""Drive the ``shoal`` CLI against a real API: the invoke runs in a thread, the API in the loop."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from shoal.api.server import ApiServer
from shoal.cli.main import app
from shoal.testing import shipped
from tests.security.conftest import secured  # noqa: F401  (the API as shoal up secures it)

Shoal = Callable[..., Awaitable[Result]]


@pytest.fixture(autouse=True)
def isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No user config and no $SHOAL_API leak into the tests."""
    path = tmp_path / "no-config.yaml"
    monkeypatch.setenv("SHOAL_CONFIG", str(path))
    monkeypatch.delenv("SHOAL_API", raising=False)
    return path


async def process(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> asyncio.subprocess.Process:
    """``shoal ARGS`` as a process of its own (output and errors on one pipe)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shoal.cli.main",
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def invoke(*args: str, input: str | None = None) -> Result:
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, app, list(args), input=input)


@pytest.fixture
def shoal(api: ApiServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Shoal:
    """``await shoal("kube", "app", "list")`` runs the CLI with ``--api`` of the test API, as
    its administrator: with the configuration ``shoal up`` writes (its URL and admin token)."""
    config = shipped.client_config(tmp_path / "shoal-up", api.url)
    monkeypatch.setenv("SHOAL_CONFIG", str(config))

    async def run(*args: str, input: str | None = None) -> Result:
        return await invoke("--api", api.url, *args, input=input)

    return run


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result


async def cli(shoal: Shoal, line: str, *args: str) -> Result:
    """``shoal`` with the words of ``line`` (split as a shell splits them), then ``args``."""
    return await shoal(*shlex.split(line), *args)


async def cli_ok(shoal: Shoal, line: str) -> Result:
    """``cli`` that must succeed."""
    return ok(await cli(shoal, line))
