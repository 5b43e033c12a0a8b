"""Real identity providers for tests: an OIDC issuer (discovery, JWKS, RSA-signed tokens)
and a server speaking Keystone's token API."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@dataclass
class Issuer:
    url: str = ""
    keys: dict[str, rsa.RSAPrivateKey] = field(default_factory=dict)
    jwks_fetches: int = 0
    announced: str | None = None  # the issuer its discovery names, if not its url

    def add_key(self, kid: str) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def token(self, kid: str, **claims: Any) -> str:
        """A token signed with key ``kid``; a claim given as None is left out."""
        now = int(time.time())
        body = {"iss": self.url, "aud": "shoal", "sub": "carol", "iat": now, "exp": now + 300}
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, self.keys[kid], algorithm="RS256", headers={"kid": kid})

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self.keys.items():
            data = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**data, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}


@asynccontextmanager
async def oidc_issuer(path: str = "") -> AsyncIterator[Issuer]:
    """An issuer at ``path`` of its server (Keycloak's: ``/realms/<realm>``)."""
    issuer = Issuer()
    issuer.add_key("k1")

    async def discovery(request: web.Request) -> web.Response:
        named = issuer.url if issuer.announced is None else issuer.announced
        return web.json_response({"issuer": named, "jwks_uri": f"{issuer.url}/jwks"})

    async def jwks(request: web.Request) -> web.Response:
        issuer.jwks_fetches += 1
        return web.json_response(issuer.jwks())

    app = web.Application()
    app.router.add_get(f"{path}/.well-known/openid-configuration", discovery)
    app.router.add_get(f"{path}/jwks", jwks)
    async with serve(app) as url:
        issuer.url = url + path
        yield issuer


@dataclass
class KeystoneServer:
    url: str = ""
    tokens: dict[str, str] = field(default_factory=dict)  # token → user name
    checks: int = 0
    answer: tuple[int, Any] | None = None  # (status, body) to send instead of Keystone's


@asynccontextmanager
async def keystone(path: str = "/v3") -> AsyncIterator[KeystoneServer]:
    """Keystone's token API at ``path`` of its server."""
    server = KeystoneServer()

    async def tokens(request: web.Request) -> web.Response:
        server.checks += 1
        if server.answer is not None:
            return web.json_response(server.answer[1], status=server.answer[0])
        subject = request.headers.get("X-Subject-Token", "")
        if request.headers.get("X-Auth-Token") not in server.tokens or subject not in server.tokens:
            return web.json_response({"error": {"code": 404}}, status=404)
        expires = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() + 3600))
        body = {
            "token": {
                "user": {"id": "u1", "name": server.tokens[subject], "domain": {"name": "Default"}},
                "roles": [{"id": "r1", "name": "member"}],
                "expires_at": expires,
                "methods": ["password"],
            }
        }
        return web.json_response(body, headers={"X-Subject-Token": subject})

    app = web.Application()
    app.router.add_get(f"{path}/auth/tokens", tokens)
    async with serve(app) as url:
        server.url = url + path
        yield server
