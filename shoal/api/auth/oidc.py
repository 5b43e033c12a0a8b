"""OpenID Connect bearer tokens (Keycloak included), validated locally.

The issuer's discovery document and JWKS are fetched once and kept; an
unknown key id fetches the JWKS again (at most ``fetches`` times per ``window``
seconds, so forged key ids cannot make us hammer the issuer). Issuer, audience and
expiry are checked on every new token; a valid token is remembered until it
expires, so the signature is verified once per token, not once per request.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import jwt

from shoal.api.auth.authn import User, authenticated
from shoal.api.auth.config import Oidc
from shoal.api.auth.remote import fetch_json

log = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


class OidcIssuer:
    def __init__(
        self,
        config: Oidc,
        fetches: int = 5,
        window: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.window = window
        self.clock = clock  # the window's clock (a test's own, to read the window's edges)
        self._jwks_uri: str | None = None
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched: deque[float] = deque(maxlen=fetches)

    async def _discover(self) -> str | None:
        if self._jwks_uri is None:
            url = f"{self.config.issuer}/.well-known/openid-configuration"
            status, doc = await fetch_json(url)
            if status != 200 or not isinstance(doc, dict):
                log.warning("OIDC discovery %s: status %s", url, status)
                return None
            if str(doc.get("issuer", "")).rstrip("/") != self.config.issuer:
                log.warning("OIDC discovery %s names another issuer %r", url, doc.get("issuer"))
                return None
            self._jwks_uri = str(doc.get("jwks_uri") or "") or None
        return self._jwks_uri

    async def _key(self, kid: str | None) -> jwt.PyJWK | None:
        key = self._keys.get(kid)
        now = self.clock()
        full = len(self._fetched) == self._fetched.maxlen
        if key is not None or (full and now - self._fetched[0] < self.window):
            return key
        self._fetched.append(now)
        uri = await self._discover()
        if uri is None:
            return None
        status, jwks = await fetch_json(uri)
        if status != 200 or not isinstance(jwks, dict):
            log.warning("OIDC JWKS %s: status %s", uri, status)
            return None
        keys: dict[str | None, jwt.PyJWK] = {}
        for data in jwks.get("keys", []):
            try:
                keys[data.get("kid")] = jwt.PyJWK(data)
            except jwt.PyJWTError:
                continue  # a key type we do not use
        self._keys = keys
        return keys.get(kid)

    async def check(self, token: str) -> tuple[User | None, float | None]:
        """The user of a token of this issuer and its expiry; (None, None) when it is not."""
        try:
            header = jwt.get_unverified_header(token)
            claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None, None
        if str(claims.get("iss", "")).rstrip("/") != self.config.issuer:
            return None, None
        if header.get("alg") not in ALGORITHMS:
            return None, None
        key = await self._key(header.get("kid"))
        if key is None:
            return None, None
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[header["alg"]],
                audience=self.config.audience,
                issuer=claims["iss"],
                options={"require": ["exp", "iss"], "verify_aud": bool(self.config.audience)},
                leeway=30,
            )
        except jwt.PyJWTError as error:
            log.info("OIDC token of %s refused: %s", self.config.issuer, error)
            return None, None
        name = claims.get(self.config.username_claim)
        if not isinstance(name, str) or not name:
            return None, None
        groups = claims.get(self.config.groups_claim) or []
        if not isinstance(groups, list):
            groups = []
        return authenticated(name, [str(g) for g in groups]), float(claims["exp"])
