"""The security configuration of an API server, read from Krake's ``api.yaml`` keys.

An existing Krake ``api.yaml`` works as is (``authentication``,
``authorization``, ``tls``); Shoal's additions live beside them
(``static.token_file``, ``oidc``, ``secrets``, ``audit``, ``limits``). Unlike
Krake, every enabled method is active at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from shoal.machinery.tls import Tls
from shoal.model.validation.kubeconfig import CredentialPolicy

Mode = Literal["always-allow", "always-deny", "RBAC"]
MODES: tuple[Mode, ...] = ("always-allow", "always-deny", "RBAC")


class ConfigError(ValueError):
    """The security configuration is not valid; the message names the key."""


@dataclass(frozen=True)
class Oidc:
    """One OpenID Connect issuer (Keycloak is one: ``{endpoint}/realms/{realm}``)."""

    issuer: str
    audience: str | None
    username_claim: str = "sub"
    groups_claim: str = "groups"


@dataclass(frozen=True)
class Limits:
    """Per-server limits; a flood of one user never starves the others."""

    max_body: int = 8 * 1024 * 1024
    max_page: int = 10_000  # a list without limit, or with a larger one, gets this many
    watches_per_user: int = 100
    min_heartbeat: float = 1.0  # seconds; more often costs the server a wake-up per watch
    rate_per_user: float = 1_000.0
    """Requests per second a user may sustain. One API process on one core serves about
    2,600 creates or 6,300 reads a second (``bench/api.py``, 2 cores): no tenant may take
    more than about a third of the writes it can serve. Shoal's own components are not
    held to it (they batch their writes)."""
    burst: int = 2_000


@dataclass(frozen=True)
class Security:
    """How requests are authenticated and authorised; the default is open (tests, library)."""

    allow_anonymous: bool = True
    static_user: str | None = None  # Krake's static strategy: every request is this user
    token_file: Path | None = None
    oidc: tuple[Oidc, ...] = ()
    keystone: str | None = None
    authorization: Mode = "always-allow"
    tls: Tls | None = None
    secrets_key_file: Path | None = None
    secrets_key_env: str | None = "SHOAL_SECRETS_KEY"
    audit: str | None = None  # a file path, or "-" for stdout
    limits: Limits = field(default_factory=Limits)
    cors_origin: str | None = None
    kubeconfig: CredentialPolicy | None = None  # None: the environment's (none allowed)


def _section(data: Any, where: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a mapping")
    return data


def _enabled(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    section = _section(data.get(name), f"authentication.strategy.{name}")
    return section if section.get("enabled", bool(section)) else None


def _path(value: Any, base: Path, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a file path")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def from_mapping(data: dict[str, Any], base: Path = Path(".")) -> Security:
    """A Security from a parsed ``api.yaml``; relative paths are relative to ``base``."""
    authn = _section(data.get("authentication"), "authentication")
    strategy = _section(authn.get("strategy"), "authentication.strategy")
    static = _enabled(strategy, "static") or {}
    oidc: list[Oidc] = []
    keycloak = _enabled(strategy, "keycloak")
    if keycloak is not None:
        endpoint = str(keycloak.get("endpoint", "http://localhost:9080")).rstrip("/")
        oidc.append(
            Oidc(
                f"{endpoint}/realms/{keycloak.get('realm', 'krake')}",
                keycloak.get("audience", "account"),
                keycloak.get("username_claim", "preferred_username"),
                keycloak.get("groups_claim", "groups"),
            )
        )
    generic = _enabled(strategy, "oidc")
    if generic is not None:
        if not generic.get("issuer"):
            raise ConfigError("authentication.strategy.oidc.issuer: required")
        oidc.append(
            Oidc(
                str(generic["issuer"]).rstrip("/"),
                generic.get("audience"),
                generic.get("username_claim", "sub"),
                generic.get("groups_claim", "groups"),
            )
        )
    keystone = _enabled(strategy, "keystone")
    mode = data.get("authorization", "always-allow")
    if mode not in MODES:
        raise ConfigError(f"authorization: {mode!r} is not one of {', '.join(MODES)}")
    tls_data = _section(data.get("tls"), "tls")
    tls = None
    if tls_data.get("enabled"):
        ca = tls_data.get("client_ca")
        tls = Tls(
            _path(tls_data.get("cert"), base, "tls.cert"),
            _path(tls_data.get("key"), base, "tls.key"),
            _path(ca, base, "tls.client_ca") if ca else None,
        )
    secrets = _section(data.get("secrets"), "secrets")
    audit = _section(data.get("audit"), "audit")
    limits = _section(data.get("limits"), "limits")
    unknown = set(limits) - set(Limits.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"limits: unknown keys {sorted(unknown)}")
    token_file = static.get("token_file")
    return Security(
        allow_anonymous=bool(authn.get("allow_anonymous", False)),
        static_user=static.get("name") if static and not token_file else None,
        token_file=_path(token_file, base, "static.token_file") if token_file else None,
        oidc=tuple(oidc),
        keystone=str(keystone.get("endpoint", "http://localhost:5000/v3")).rstrip("/")
        if keystone is not None
        else None,
        authorization=mode,
        tls=tls,
        secrets_key_file=_path(secrets["key_file"], base, "secrets.key_file")
        if secrets.get("key_file")
        else None,
        secrets_key_env=secrets.get("key_env", "SHOAL_SECRETS_KEY"),
        audit=str(_path(audit["path"], base, "audit.path"))
        if audit.get("path") not in (None, "-")
        else audit.get("path"),
        limits=Limits(**limits),
        cors_origin=authn.get("cors_origin"),
        kubeconfig=_credential_policy(data.get("kubeconfig")),
    )


def _credential_policy(data: Any) -> CredentialPolicy | None:
    """``kubeconfig: {allow_exec: [commands], allow_files: bool, allow_auth_provider: bool}``."""
    if data is None:
        return None
    section = _section(data, "kubeconfig")
    unknown = set(section) - {"allow_exec", "allow_files", "allow_auth_provider"}
    if unknown:
        raise ConfigError(f"kubeconfig: unknown keys {sorted(unknown)}")
    commands = section.get("allow_exec") or []
    if not isinstance(commands, list) or not all(isinstance(c, str) and c for c in commands):
        raise ConfigError("kubeconfig.allow_exec: must be a list of commands")
    for key in ("allow_files", "allow_auth_provider"):
        if not isinstance(section.get(key, False), bool):
            raise ConfigError(f"kubeconfig.{key}: must be true or false")
    return CredentialPolicy(
        frozenset(commands),
        section.get("allow_files", False),
        section.get("allow_auth_provider", False),
    )


def load(path: Path) -> Security:
    """Read an ``api.yaml`` (Krake's or Shoal's)."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path}: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping")
    return from_mapping(data, path.parent)
