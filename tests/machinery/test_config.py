"""Settings files: an error names the file, the line and the field, for the scheduler's and
the agent's settings alike, and ``shoal scheduler --config`` prints it as one message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shoal.agent.config import AgentConfig
from shoal.machinery.config import ConfigError
from shoal.model.scheduler_config import SchedulerConfig


def test_errors_name_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text("scheduler:\n  workers: 4\n  backoff:\n    initial: soon\n")
    with pytest.raises(ConfigError) as caught:
        SchedulerConfig.load(path)
    assert str(caught.value).startswith(f"{path}:4: backoff.initial: ")


def test_top_level_or_section_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("cluster: from-file\n")
    assert AgentConfig.from_file(path).cluster == "from-file"
    assert AgentConfig.from_file(path, cluster="flag").cluster == "flag"
    path.write_text("agent:\n  cluster: nested\n")
    assert AgentConfig.from_file(path).cluster == "nested"
    assert SchedulerConfig.load(None) == SchedulerConfig()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("workers: [1\n", ":2: not YAML"), ("- 1\n", ":1: must be a mapping"), (None, "cannot read")],
)
def test_unreadable_files(tmp_path: Path, text: str | None, expected: str) -> None:
    path = tmp_path / "scheduler.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match=expected):
        SchedulerConfig.load(path)


def test_the_cli_prints_one_message(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text("workers: many\n")
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.main", "scheduler", "--api", "http://127.0.0.1:9",
         "--config", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"{path}:1: workers: " in done.stderr
    assert "Traceback" not in done.stderr


def test_the_security_file_is_read_the_same_way(tmp_path: Path) -> None:
    """``api.yaml``: Krake's sections take keys Shoal does not use; Shoal's refuse them, and
    a mistake names the file, the line and the field."""
    from shoal.api.auth.config import load

    path = tmp_path / "api.yaml"
    path.write_text(
        "etcd: {host: 127.0.0.1}\n"
        "authentication:\n  allow_anonymous: false\n  strategy:\n"
        "    keycloak: {enabled: true, endpoint: 'http://kc:9080', realm: r, extra: 1}\n"
        "limits:\n  max_page: 50\n"
    )
    security = load(path)
    assert security.oidc[0].issuer == "http://kc:9080/realms/r"
    assert security.limits.max_page == 50
    path.write_text("authorization: RBAC\nlimits:\n  max_page: 50\n  max_pages: 3\n")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:4: limits.max_pages: ")
    path.write_text("kubeconfig:\n  allow_files: 'yes'\n")
    with pytest.raises(ConfigError, match=r":2: kubeconfig.allow_files: "):
        load(path)
    path.write_text("authorization: sometimes\n")
    with pytest.raises(ConfigError, match=r":1: authorization: "):
        load(path)
