"""Security of the API: authentication, authorization, secrets, audit, limits, TLS.

``protect(security, store)`` builds everything one server needs from its
configuration; ``create_app(store, security=...)`` installs it. Without a
configuration the API stays open (library use and tests).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from shoal.api.auth.audit import Audit
from shoal.api.auth.authn import Authenticator, TokenCache, TokenCheck
from shoal.api.auth.clusters import ClusterCredentials
from shoal.api.auth.config import Security
from shoal.api.auth.keystone import Keystone
from shoal.api.auth.limits import PerUser
from shoal.api.auth.oidc import OidcIssuer
from shoal.api.auth.rbac import Authorizer, authorizer
from shoal.api.auth.roles import ensure_defaults
from shoal.api.auth.secrets import Cipher, load_keys
from shoal.api.auth.store import SecuredStore
from shoal.store.base import Store

__all__ = ["Protection", "Security", "protect"]


@dataclass
class Protection:
    """The parts of one server's security, and the store it must use (secrets sealed)."""

    security: Security
    store: Store
    authenticator: Authenticator
    authorizer: Authorizer
    limits: PerUser
    audit: Audit | None
    clusters: ClusterCredentials | None = None  # None: no secrets key, no pull clusters

    def guard_options(self) -> dict[str, Any]:
        return {
            "authn": self.authenticator,
            "authz": self.authorizer,
            "limits": self.limits,
            "audit": self.audit,
            "store": self.store,
        }

    async def start(self) -> None:
        if self.security.authorization == "RBAC":
            await ensure_defaults(self.store)
        await self.authorizer.start()

    async def stop(self) -> None:
        await self.authorizer.stop()
        if self.audit is not None:
            self.audit.close()


def protect(security: Security, store: Store) -> Protection:
    ring = load_keys(security.secrets_key_file, security.secrets_key_env)
    cipher = Cipher(ring) if ring is not None else None
    sealed = SecuredStore(store, cipher)
    cache = TokenCache(time.time)
    clusters = (
        ClusterCredentials(ring, security.cluster_credential_ttl) if ring is not None else None
    )
    bearer: list[TokenCheck] = [cache.cached(clusters.check)] if clusters is not None else []
    bearer += [cache.cached(OidcIssuer(o).check) for o in security.oidc]
    keystone = cache.cached(Keystone(security.keystone).check) if security.keystone else None
    return Protection(
        security,
        sealed,
        Authenticator(security, bearer, keystone, time.time),
        authorizer(security.authorization, sealed),
        PerUser(security.limits),
        Audit(security.audit) if security.audit else None,
        clusters,
    )
