"""The security configuration of an API server, read from Krake's ``api.yaml`` keys.

An existing Krake ``api.yaml`` works as is (``authentication``,
``authorization``, ``tls``, and keys Shoal does not use, such as ``etcd``);
Shoal's additions live beside them (``static.token_file``, ``oidc``,
``secrets``, ``audit``, ``limits``, ``kubeconfig``). Unlike Krake, every
enabled method is active at once.

The file is read by the settings loader every component uses
(``shoal.machinery.config``): a mistake is one line naming the file, the line
and the field. Krake's sections accept keys Shoal does not know; Shoal's own
sections refuse them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from shoal.machinery import config
from shoal.machinery.config import ConfigError
from shoal.machinery.tls import Tls
from shoal.model.validation.kubeconfig import CredentialPolicy

Mode = Literal["always-allow", "always-deny", "RBAC"]


@dataclass(frozen=True)
class Oidc:
    """One OpenID Connect issuer (Keycloak is one: ``{endpoint}/realms/{realm}``)."""

    issuer: str
    audience: str | None
    username_claim: str = "sub"
    groups_claim: str = "groups"


class Limits(BaseModel):
    """Per-server limits (``limits:``); a flood of one user never starves the others."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_body: int = Field(default=8 * 1024 * 1024, gt=0, description="Bytes of a request body")
    max_page: int = Field(
        default=10_000, gt=0, description="Objects a list without limit (or a larger one) gets"
    )
    watches_per_user: int = Field(default=100, gt=0)
    min_heartbeat: float = Field(
        default=1.0, gt=0, description="Seconds; more often costs the server a wake-up per watch"
    )
    rate_per_user: float = Field(
        default=1_000.0,
        gt=0,
        description="Requests per second a user may sustain. One API process on one core "
        "serves about 2,600 creates or 6,300 reads a second (bench/api.py, 2 cores): no "
        "tenant may take more than about a third of the writes it can serve. Shoal's own "
        "components are not held to it (they batch their writes)",
    )
    burst: int = Field(default=2_000, gt=0)
    request_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a request's headers and body have to arrive (from the "
        "connection, or from the previous answer on it); slower ones get a 408 and the "
        "connection is closed",
    )
    connections_per_client: int = Field(
        default=256,
        gt=0,
        description="Connections one client address may hold before their first request "
        "has arrived (half-sent requests); more are refused (429), as are more than 16 "
        "times as many open connections in all. Busy connections do not count against "
        "the first: Shoal's components on the API's host share one address and keep "
        "hundreds open between them",
    )


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
    cluster_credential_ttl: float = 3600.0  # seconds a pull cluster's credential lasts


# the file -------------------------------------------------------------------------------


class _Krake(BaseModel):
    """A section Krake defines: keys Shoal does not use are accepted and ignored."""

    model_config = ConfigDict(extra="allow")


class _Shoal(BaseModel):
    """A section of Shoal's own: an unknown key is a mistake."""

    model_config = ConfigDict(extra="forbid")


class _Strategy(_Krake):
    enabled: bool | None = None

    @property
    def on(self) -> bool:
        """``enabled``, or, without it, whether the section says anything at all."""
        if self.enabled is not None:
            return self.enabled
        return bool(self.model_fields_set or self.model_extra)


class _Static(_Strategy):
    name: str | None = None
    token_file: str | None = None


class _Keycloak(_Strategy):
    endpoint: str = "http://localhost:9080"
    realm: str = "krake"
    audience: str | None = "account"
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"


class _OidcStrategy(_Strategy):
    issuer: str | None = None
    audience: str | None = None
    username_claim: str = "sub"
    groups_claim: str = "groups"


class _Keystone(_Strategy):
    endpoint: str = "http://localhost:5000/v3"


class _Strategies(_Krake):
    static: _Static | None = None
    keycloak: _Keycloak | None = None
    oidc: _OidcStrategy | None = None
    keystone: _Keystone | None = None


class _Authentication(_Krake):
    allow_anonymous: bool = False
    cors_origin: str | None = None
    strategy: _Strategies | None = None


class _TlsSection(_Krake):
    enabled: bool = False
    cert: str | None = None
    key: str | None = None
    client_ca: str | None = None


class _Secrets(_Shoal):
    key_file: str | None = None
    key_env: str = "SHOAL_SECRETS_KEY"


class _Audit(_Shoal):
    path: str | None = Field(default=None, description='A file, or "-" for stdout')


class _Kubeconfig(_Shoal):
    allow_exec: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Commands a kubeconfig's exec may run"
    )
    allow_files: StrictBool = False
    allow_auth_provider: StrictBool = False


class _Pull(_Shoal):
    credential_ttl: float = Field(
        default=3600.0,
        ge=60,
        le=7 * 24 * 3600,
        description="Seconds a pull cluster's credential lasts; its agent renews it at half "
        "that (docs/pull-mode.md)",
    )


class ApiFile(_Krake):
    """``api.yaml``: Krake's keys and Shoal's."""

    authentication: _Authentication | None = None
    authorization: Mode = "always-allow"
    tls: _TlsSection | None = None
    secrets: _Secrets | None = None
    audit: _Audit | None = None
    limits: Limits | None = None
    kubeconfig: _Kubeconfig | None = None
    pull: _Pull | None = None


def _path(value: str | None, base: Path, where: str) -> Path:
    if not value:
        raise ConfigError(f"{where}: must be a file path")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _on(strategy: _Strategy | None) -> bool:
    return strategy is not None and strategy.on


def security_of(data: ApiFile, base: Path = Path(".")) -> Security:
    """The Security an ``api.yaml`` describes; relative paths are relative to ``base``."""
    authn = data.authentication or _Authentication()
    strategies = authn.strategy or _Strategies()
    static = strategies.static if _on(strategies.static) else None
    oidc: list[Oidc] = []
    keycloak = strategies.keycloak if _on(strategies.keycloak) else None
    if keycloak is not None:
        issuer = f"{keycloak.endpoint.rstrip('/')}/realms/{keycloak.realm}"
        oidc.append(
            Oidc(issuer, keycloak.audience, keycloak.username_claim, keycloak.groups_claim)
        )
    generic = strategies.oidc if _on(strategies.oidc) else None
    if generic is not None:
        if not generic.issuer:
            raise ConfigError("authentication.strategy.oidc.issuer: required")
        oidc.append(
            Oidc(
                generic.issuer.rstrip("/"),
                generic.audience,
                generic.username_claim,
                generic.groups_claim,
            )
        )
    keystone = strategies.keystone if _on(strategies.keystone) else None
    tls = None
    if data.tls is not None and data.tls.enabled:
        section = data.tls
        tls = Tls(
            _path(section.cert, base, "tls.cert"),
            _path(section.key, base, "tls.key"),
            _path(section.client_ca, base, "tls.client_ca") if section.client_ca else None,
        )
    secrets = data.secrets or _Secrets()
    audit = (data.audit or _Audit()).path
    token_file = static.token_file if static is not None else None
    policy = data.kubeconfig
    return Security(
        allow_anonymous=authn.allow_anonymous,
        static_user=static.name if static is not None and not token_file else None,
        token_file=_path(token_file, base, "static.token_file") if token_file else None,
        oidc=tuple(oidc),
        keystone=keystone.endpoint.rstrip("/") if keystone is not None else None,
        authorization=data.authorization,
        tls=tls,
        secrets_key_file=(
            _path(secrets.key_file, base, "secrets.key_file") if secrets.key_file else None
        ),
        secrets_key_env=secrets.key_env,
        audit=str(_path(audit, base, "audit.path")) if audit not in (None, "-") else audit,
        limits=data.limits or Limits(),
        cors_origin=authn.cors_origin,
        cluster_credential_ttl=(data.pull or _Pull()).credential_ttl,
        kubeconfig=None
        if policy is None
        else CredentialPolicy(
            frozenset(policy.allow_exec), policy.allow_files, policy.allow_auth_provider
        ),
    )


def from_mapping(data: dict[str, Any], base: Path = Path(".")) -> Security:
    """A Security from a parsed ``api.yaml``; relative paths are relative to ``base``."""
    return security_of(config.validate(ApiFile, data, "api.yaml"), base)


def load(path: Path) -> Security:
    """Read an ``api.yaml`` (Krake's or Shoal's)."""
    return security_of(config.load(ApiFile, path), path.parent)
