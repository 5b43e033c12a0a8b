"""The store of ``shoal api`` and ``shoal up``: --store, $SHOAL_STORE, the config file, SQLite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.cli.config import resolve_store
from shoal.cli.errors import CliError
from shoal.testing.launch import ROOT
from tests.util import free_port


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    monkeypatch.setenv("SHOAL_CONFIG", str(path))
    monkeypatch.delenv("SHOAL_STORE", raising=False)
    return path


def test_precedence(config: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    default = tmp_path / "data" / "shoal.db"
    assert resolve_store(None, default) == f"sqlite://{default.resolve()}"
    config.write_text("api: http://127.0.0.1:1\nstore: etcd://a:2379,b:2379\n")
    assert resolve_store(None, default) == "etcd://a:2379,b:2379"
    monkeypatch.setenv("SHOAL_STORE", "sqlite:///env.db")
    assert resolve_store(None, default) == "sqlite:///env.db"
    assert resolve_store("etcd://c:2379", default) == "etcd://c:2379"


def test_bad_store_settings(config: Path, tmp_path: Path) -> None:
    config.write_text("store: [1, 2]\n")
    with pytest.raises(CliError, match="'store' must be a URL string"):
        resolve_store(None, tmp_path / "x.db")
    with pytest.raises(CliError, match="unknown store URL"):
        resolve_store("postgres://db", tmp_path / "x.db")


@pytest.mark.integration
@pytest.mark.timeout(30)
def test_api_uses_the_configured_store(tmp_path: Path) -> None:
    db = tmp_path / "from-config.db"
    config = tmp_path / "config.yaml"
    config.write_text(f"store: sqlite://{db}\n")
    env = dict(os.environ, PYTHONPATH=ROOT, SHOAL_CONFIG=str(config), COLUMNS="300")
    env.pop("SHOAL_STORE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli.main", "api", "--port", str(free_port())],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # the banner, once listening
        deadline = time.monotonic() + 20
        while "listening" not in line and time.monotonic() < deadline and line:
            line = proc.stdout.readline().decode()
        assert f"store sqlite://{db}" in line, line
        assert db.exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(90)
def test_up_on_etcd(tmp_path: Path) -> None:
    """``shoal up --store etcd://...``: the all-in-one places the demo with no SQLite file."""
    from tests.fixtures.etcd import etcd_available, running_etcd

    if not etcd_available():
        pytest.skip("no etcd binary")
    env = dict(os.environ, PYTHONPATH=ROOT, SHOAL_CONFIG=os.devnull, COLUMNS="200")
    env.pop("SHOAL_STORE", None)
    with running_etcd(tmp_path / "etcd") as etcd:
        result = subprocess.run(
            [
                sys.executable, "-m", "shoal.cli.main", "up",
                "--port", str(free_port()),
                "--data-dir", str(tmp_path / "data"),
                "--store", etcd.url,
                "--exit-after-demo",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=80,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"(store {etcd.url})" in result.stdout
    assert "Application demo (constraint: location in (DE, FR)) → sim-2" in result.stdout
    assert not (tmp_path / "data" / "shoal.db").exists()
