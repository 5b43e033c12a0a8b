"""What ``shoal up`` starts, in one process or in many: the embedded installation."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Installation:
    """The options of ``shoal up``, as both of its forms take them."""

    data_dir: Path
    store_url: str
    port: int
    tls: bool
    clusters: int
    nodes: int
    demo: bool
    exit_after_demo: bool
    log_level: str
    scheduler_config: Path | None
    pull_clusters: int = 0  # simulated clusters joined in pull mode (needs tls)


def private_data_dir(data_dir: Path) -> None:
    """The data directory holds the store, logs, kubeconfigs and keys: only this user may
    read it. Everything ``shoal up`` and its processes create is 0600 (directories 0700);
    what an earlier start left is made so too."""
    os.umask(0o077)
    data_dir.mkdir(parents=True, exist_ok=True)
    for path in (data_dir, *data_dir.rglob("*")):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o777
        private = mode & 0o700
        if mode != private:
            path.chmod(private)
