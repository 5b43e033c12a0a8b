"""Where the API is (--api, $SHOAL_API, config file, default) and when it cannot be reached."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.api.server import ApiServer
from shoal.cli.commands import expand_args
from shoal.cli.config import resolve_api
from shoal.cli.errors import CliError
from shoal.cli.locations import DEFAULT_URL
from shoal.testing import shipped
from tests.cli.conftest import invoke, ok
from tests.util import free_port


def write_config(path: Path, text: str) -> None:
    path.write_text(text)


def test_resolution_order(monkeypatch: pytest.MonkeyPatch, isolated_config: Path) -> None:
    assert resolve_api(None) == DEFAULT_URL == "http://127.0.0.1:8080"
    isolated_config.write_text("api: http://from-config:1\n")
    assert resolve_api(None) == "http://from-config:1"
    monkeypatch.setenv("SHOAL_API", "http://from-env:2")
    assert resolve_api(None) == "http://from-env:2"
    assert resolve_api("http://from-option:3") == "http://from-option:3"


def test_bad_config(isolated_config: Path) -> None:
    isolated_config.write_text("api: [\n")
    with pytest.raises(CliError, match="not valid YAML"):
        resolve_api(None)
    isolated_config.write_text("- a\n")
    with pytest.raises(CliError, match="must hold a mapping"):
        resolve_api(None)


async def test_config_file_and_env(
    api: ApiServer, isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = shipped.token(shipped.ADMIN)  # the API is secured as shoal up ships it
    write_config(isolated_config, f"api: {api.url}\ntoken: {token}\n")
    ok(await invoke("kube", "app", "list"))
    write_config(isolated_config, f"token: {token}\n")
    monkeypatch.setenv("SHOAL_API", api.url)
    ok(await invoke("core", "gm", "list"))


async def test_unreachable_api() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = await invoke("--api", url, "kube", "app", "list")
    assert result.exit_code == 2
    assert f"cannot reach the Shoal API at {url}" in result.stderr
    assert "Traceback" not in result.output
    watch = await invoke("--api", url, "get", "apps", "--watch", "--watch-timeout", "1")
    assert watch.exit_code == 2


def test_expand_args() -> None:
    assert expand_args(["--metric", "load", "1.5", "--metric", "x=2", "NAME"]) == [
        "--metric",
        "load=1.5",
        "--metric",
        "x=2",
        "NAME",
    ]
    assert expand_args(["x", "--allowed-values", "1", "2", "-3", "--min", "0"]) == [
        "x",
        "--allowed-values",
        "1",
        "--allowed-values",
        "2",
        "--allowed-values",
        "-3",
        "--min",
        "0",
    ]
    # a name that is not followed by a number is left for the option parser to judge
    assert expand_args(["--metric", "load", "heavy"]) == ["--metric", "load", "heavy"]
    assert expand_args(["--", "--metric", "a", "1"]) == ["--", "--metric", "a", "1"]


async def test_help_without_api() -> None:
    result = ok(await invoke("--help"))
    for group in ("kube", "core", "infra", "get", "list", "delete", "apply"):
        assert group in result.stdout
    ok(await invoke("kube", "cluster", "register", "--help"))
