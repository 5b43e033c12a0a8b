"""Each authentication method against real parts, all enabled at once."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from shoal.api.auth.config import from_mapping, load
from shoal.api.server import ApiServer, start_api
from shoal.machinery.tls import issue, make_ca, write_pair
from shoal.testing.builders import manifest
from tests.security.conftest import token_file
from tests.security.idp import Issuer, KeystoneServer, keystone, oidc_issuer

APPS = "/kubernetes/namespaces/a/applications"


def _users(audit: Path) -> list[str]:
    return [orjson.loads(line)["user"] for line in audit.read_bytes().splitlines()]


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[tuple[Issuer, KeystoneServer, Path]]:
    ca = make_ca()
    write_pair(tmp_path, "ca", ca)
    write_pair(tmp_path, "api", issue(*ca, "shoal-api", hosts=("127.0.0.1", "localhost")))
    write_pair(tmp_path, "dave", issue(*ca, "dave", groups=("ops", "dev")))
    write_pair(tmp_path, "mallory", issue(*make_ca("other-ca"), "mallory"))
    token_file(tmp_path / "tokens.csv")
    async with oidc_issuer() as issuer, keystone() as ks:
        ks.tokens["ks-token"] = "erin"
        yield issuer, ks, tmp_path


@pytest.fixture
def api_options(parts: tuple[Issuer, KeystoneServer, Path]) -> dict[str, Any]:
    """Every authentication strategy at once, over TLS with client certificates."""
    issuer, ks, tmp = parts
    config = {
        "authentication": {
            "allow_anonymous": False,
            "strategy": {
                "static": {"enabled": True, "token_file": "tokens.csv"},
                "keystone": {"enabled": True, "endpoint": ks.url},
                "oidc": {
                    "enabled": True,
                    "issuer": issuer.url,
                    "audience": "shoal",
                    "username_claim": "sub",
                    "groups_claim": "groups",
                },
            },
        },
        "authorization": "always-allow",
        "tls": {"enabled": True, "cert": "api.crt", "key": "api.key", "client_ca": "ca.crt"},
        "audit": {"path": "audit.jsonl"},
    }
    (tmp / "api.yaml").write_text(yaml.safe_dump(config))
    return {"security": load(tmp / "api.yaml")}


def _client(
    api: ApiServer, tmp: Path, cert: str | None = None, **headers: str
) -> httpx.AsyncClient:
    context = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    if cert is not None:
        context.load_cert_chain(str(tmp / f"{cert}.crt"), str(tmp / f"{cert}.key"))
    return httpx.AsyncClient(base_url=api.url, verify=context, headers=headers)


async def _create(client: httpx.AsyncClient, name: str) -> int:
    body = {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {"manifest": manifest(name)},
    }
    return (await client.post(APPS, json=body)).status_code


async def test_every_method_at_once(
    api: ApiServer, parts: tuple[Issuer, KeystoneServer, Path]
) -> None:
    issuer, ks, tmp = parts
    assert api.url.startswith("https://")
    async with _client(api, tmp) as nobody:
        assert (await nobody.get("/healthz")).status_code == 200
        assert (await nobody.get(APPS)).status_code == 401
    async with _client(api, tmp, "dave") as dave:  # client certificate: CN user, O groups
        assert await _create(dave, "by-cert") == 200
    async with _client(api, tmp, authorization="Bearer alice-token") as alice:
        assert await _create(alice, "by-static") == 200
    token = issuer.token("k1", groups=["team"])
    async with _client(api, tmp, authorization=f"Bearer {token}") as carol:
        assert await _create(carol, "by-oidc") == 200
        assert await _create(carol, "by-oidc-again") == 200
    async with _client(api, tmp, **{"x-auth-token": "ks-token"}) as erin:
        assert await _create(erin, "by-keystone") == 200
        assert await _create(erin, "by-keystone-again") == 200
    assert ks.checks == 1  # cached for the token's lifetime
    assert _users(tmp / "audit.jsonl") == ["dave", "alice", "carol", "carol", "erin", "erin"]


async def test_refused_credentials(
    api: ApiServer, parts: tuple[Issuer, KeystoneServer, Path]
) -> None:
    issuer, _, tmp = parts
    with pytest.raises(httpx.HTTPError):  # a certificate of another CA fails the handshake
        async with _client(api, tmp, "mallory") as mallory:
            await mallory.get(APPS)
    bad = [
        issuer.token("k1", exp=1),  # expired
        issuer.token("k1", aud="someone-else"),
        issuer.token("k1", iss="http://evil.example"),
        "not.a.jwt",
    ]
    issuer.add_key("stolen")
    forged = issuer.token("stolen")
    del issuer.keys["stolen"]
    for token in [*bad, forged]:
        async with _client(api, tmp, authorization=f"Bearer {token}") as client:
            assert (await client.get(APPS)).status_code == 401, token
    async with _client(api, tmp, **{"x-auth-token": "wrong"}) as client:
        assert (await client.get(APPS)).status_code == 401


async def test_oidc_key_rotation_fetches_jwks_again(
    api: ApiServer, parts: tuple[Issuer, KeystoneServer, Path]
) -> None:
    issuer, _, tmp = parts
    async with _client(api, tmp, authorization=f"Bearer {issuer.token('k1')}") as client:
        assert (await client.get(APPS)).status_code == 200
    fetches = issuer.jwks_fetches
    issuer.add_key("k2")
    async with _client(
        api, tmp, authorization=f"Bearer {issuer.token('k2', sub='frank')}"
    ) as client:
        assert (await client.get(APPS)).status_code == 200
    assert issuer.jwks_fetches == fetches + 1


async def test_static_token_file_is_read_again(tmp_path: Path) -> None:
    from shoal.api.auth import Security

    tokens = tmp_path / "tokens.csv"
    tokens.write_text("t1,u1,u1\n")
    server = await start_api(security=Security(allow_anonymous=False, token_file=tokens))
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            assert (
                await client.get(APPS, headers={"authorization": "Bearer t1"})
            ).status_code == 200
            tokens.write_text("t2,u2,u2\n")
            import os
            import time

            os.utime(tokens, (time.time() + 5, time.time() + 5))
            await __import__("asyncio").sleep(1.1)
            assert (
                await client.get(APPS, headers={"authorization": "Bearer t1"})
            ).status_code == 401
            assert (
                await client.get(APPS, headers={"authorization": "Bearer t2"})
            ).status_code == 200
    finally:
        await server.stop()


def test_krake_api_yaml_is_accepted() -> None:
    krake = yaml.safe_load(
        """
authentication:
  allow_anonymous: true
  strategy:
    static: {enabled: false, name: system}
    keystone: {enabled: true, endpoint: http://localhost:5000/v3}
    keycloak: {enabled: true, endpoint: http://localhost:9080, realm: krake}
  cors_origin: "*"
authorization: RBAC
tls: {enabled: false, cert: cert.pem, key: key.pem, client_ca: ca.pem}
etcd: {host: 127.0.0.1, port: 2379}
"""
    )
    security = from_mapping(krake)
    assert security.allow_anonymous and security.authorization == "RBAC"
    assert security.keystone == "http://localhost:5000/v3"
    assert security.oidc[0].issuer == "http://localhost:9080/realms/krake"
    assert security.static_user is None and security.tls is None
    static = from_mapping(
        {"authentication": {"strategy": {"static": {"enabled": True, "name": "system"}}}}
    )
    assert static.static_user == "system" and not static.allow_anonymous


async def test_anonymous_when_configured(tmp_path: Path) -> None:
    from shoal.api.auth import Security

    server = await start_api(
        security=Security(
            allow_anonymous=True, authorization="always-allow", audit=str(tmp_path / "a")
        )
    )
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            assert await _create(client, "anon") == 200
        assert _users(tmp_path / "a") == ["system:anonymous"]
    finally:
        await server.stop()
    server = await start_api(security=Security(allow_anonymous=True, authorization="always-deny"))
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            assert (await client.get(APPS)).status_code == 403
            assert (await client.get("/healthz")).status_code == 200
    finally:
        await server.stop()
