"""Krake 1.0.1's own controllers as subprocesses of Krake's Python, configured as Krake documents.

``KrakeControllers(python, api_url, tmp)`` writes each controller's YAML file
into ``tmp`` and starts ``python -m krake.controller...`` with it; ``stop``
ends them (SIGTERM, then SIGKILL), and ``logs`` returns what they printed,
for an assertion message.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODULES = {
    "scheduler": "krake.controller.scheduler",
    "kubernetes_application": "krake.controller.kubernetes.application",
    "garbage_collector": "krake.controller.gc",
    "infrastructure": "krake.controller.infrastructure",
}
LOG = {
    "version": 1,
    "level": "INFO",
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
    "handlers": {"out": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"level": "INFO", "handlers": ["out"]},
}
_HOOK = {"intermediate_src": "/nonexistent.pem", "intermediate_key_src": "/nonexistent.pem"}


def config(name: str, api_url: str) -> dict[str, Any]:
    """A controller's configuration: Krake's fields, TLS off, logs to stderr."""
    out: dict[str, Any] = {
        "api_endpoint": api_url,
        "worker_count": 5,
        "debounce": 1.0,  # Krake's default; shorter lets stale events race a migration
        "tls": {"enabled": False, "client_ca": "", "client_cert": "", "client_key": ""},
        "log": LOG,
    }
    if name == "scheduler":
        out.update(reschedule_after=60, stickiness=0.1)
    if name == "infrastructure":
        out["poll_interval"] = 0.5  # Krake's default waits 30 s between two looks
    if name == "kubernetes_application":
        out["hooks"] = {"complete": dict(_HOOK), "shutdown": dict(_HOOK)}
    return out


@dataclass
class KrakeControllers:
    python: str
    api_url: str
    tmp: Path
    names: tuple[str, ...] = ("scheduler", "kubernetes_application", "garbage_collector")
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self) -> None:
        for name in self.names:
            path = self.tmp / f"{name}.yaml"
            path.write_text(json.dumps(config(name, self.api_url)))  # JSON is YAML
            log = open(self.tmp / f"{name}.log", "wb")
            self.procs[name] = subprocess.Popen(
                [self.python, "-W", "ignore", "-m", MODULES[name], "--config", str(path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.tmp,
            )
            log.close()

    def running(self) -> dict[str, int | None]:
        """Each controller's exit code, None while it runs."""
        return {name: proc.poll() for name, proc in self.procs.items()}

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(
            f"--- {name}\n" + (self.tmp / f"{name}.log").read_text()[-tail:] for name in self.procs
        )

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
