"""Zero set-up security for ``shoal up``: its own CA, tokens and key in its data directory.

The first start writes, under ``<data_dir>/security/``: a CA and the API's
certificate, a token per component, one for the admin and one to scrape
metrics with (also alone in ``metrics.token``), the key that
encrypts secrets, the ``api.yaml`` that uses them (RBAC, no anonymous), and
``config.yaml``, a CLI configuration (``api``, ``token``, ``ca``) that the
CLI reads from ``./data/security`` or through ``$SHOAL_CONFIG``. Later starts
reuse them.
"""

from __future__ import annotations

import dataclasses
import secrets as random
from dataclasses import dataclass
from pathlib import Path

import yaml

from shoal.api.auth.config import Security, load
from shoal.api.auth.roles import ADMINS, COMPONENTS, component_user
from shoal.api.auth.secrets import new_key
from shoal.machinery.files import write_atomically
from shoal.machinery.tls import issue, make_ca, write_pair

ADMIN = "admin"
METRICS = "system:metrics"
"""Who scrapes metrics: the API's ``/metrics`` takes any user; the components' take only
this user's token (``metrics.token``, for Prometheus' ``credentials_file``)."""


@dataclass(frozen=True)
class Setup:
    directory: Path
    security: Security
    tokens: dict[str, str]  # user → token (``admin``, ``system:<component>``, ``METRICS``)
    ca: Path

    @property
    def client_config(self) -> Path:
        return self.directory / "config.yaml"

    @property
    def metrics_token_file(self) -> Path:
        return self.directory / "metrics.token"

    def token_of(self, component: str) -> str:
        return self.tokens[component_user(component)]

    def write_client_config(self, url: str) -> Path:
        """The CLI's configuration for this API: its URL, the admin token, the CA."""
        text = yaml.safe_dump({"api": url, "token": self.tokens[ADMIN], "ca": str(self.ca)})
        return write_atomically(self.client_config, text, private=True)


def _read_tokens(path: Path) -> dict[str, str]:
    tokens = {}
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) >= 2 and not line.startswith("#"):
            tokens[parts[1]] = parts[0]
    return tokens


def ensure(
    data_dir: Path, tls: bool = True, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
) -> Setup:
    """Make what is missing under ``data_dir/security`` and return the set-up.

    ``tls=False`` serves plain HTTP (``shoal up`` on loopback); the CA is made all the same.
    """
    directory = (data_dir / "security").resolve()
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    if not (directory / "ca.crt").exists():
        ca = make_ca("shoal-up-ca")
        write_pair(directory, "ca", ca)
        write_pair(directory, "api", issue(*ca, "shoal-api", hosts=hosts))
    tokens_path = directory / "tokens.csv"
    if not tokens_path.exists():
        users = [(ADMIN, ADMINS)] + [(component_user(c), "") for c in COMPONENTS]
        users.append((METRICS, ""))
        lines = [f'{random.token_urlsafe(32)},{u},{u},"{g}"' for u, g in users]
        write_atomically(tokens_path, "\n".join(lines) + "\n", private=True)
    elif METRICS not in _read_tokens(tokens_path):  # made before scrapes needed a token
        line = f'{random.token_urlsafe(32)},{METRICS},{METRICS},""\n'
        write_atomically(tokens_path, tokens_path.read_text() + line, private=True)
    tokens = _read_tokens(tokens_path)
    metrics_token = directory / "metrics.token"
    if not metrics_token.exists() or metrics_token.read_text().strip() != tokens[METRICS]:
        write_atomically(metrics_token, tokens[METRICS] + "\n", private=True)
    key_path = directory / "secrets.key"
    if not key_path.exists():
        write_atomically(key_path, new_key() + "\n", private=True)
    api_yaml = directory / "api.yaml"
    if not api_yaml.exists():
        config = {
            "authentication": {
                "allow_anonymous": False,
                "strategy": {"static": {"enabled": True, "token_file": "tokens.csv"}},
            },
            "authorization": "RBAC",
            "tls": {"enabled": True, "cert": "api.crt", "key": "api.key", "client_ca": "ca.crt"},
            "secrets": {"key_file": "secrets.key"},
            "audit": {"path": "audit.jsonl"},
        }
        write_atomically(api_yaml, yaml.safe_dump(config, sort_keys=False))
    security = load(api_yaml)
    if not tls:
        security = dataclasses.replace(security, tls=None)
    return Setup(directory, security, tokens, directory / "ca.crt")
