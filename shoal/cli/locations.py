"""Where the CLI looks for the API and its settings: environment variables and files."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8080"
"""The same default as ``shoal.client.rest``'s (a test keeps them equal), without importing it."""

ENV_API = "SHOAL_API"
ENV_CONFIG = "SHOAL_CONFIG"
DEFAULT_CONFIG = "~/.config/shoal/config.yaml"


UP_CONFIG = Path("data/security/config.yaml")
"""What ``shoal up`` writes (API URL, admin token, CA): used from its directory when there is
no config file of one's own."""


def config_path() -> Path:
    if os.environ.get(ENV_CONFIG):
        return Path(os.environ[ENV_CONFIG]).expanduser()
    own = Path(DEFAULT_CONFIG).expanduser()
    return UP_CONFIG.resolve() if not own.exists() and UP_CONFIG.exists() else own
