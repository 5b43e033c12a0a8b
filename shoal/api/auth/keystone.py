"""Keystone tokens: ``X-Auth-Token`` checked against ``GET /v3/auth/tokens``.

Keystone answers 200 with the token (user, roles, ``expires_at``) or 404; a
valid token is remembered until it expires. The user is the token's user
name; its roles become groups.
"""

from __future__ import annotations

from datetime import datetime

from shoal.api.auth.authn import User, authenticated
from shoal.api.auth.remote import fetch_json


class Keystone:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")

    async def check(self, token: str) -> tuple[User | None, float | None]:
        headers = {"X-Auth-Token": token, "X-Subject-Token": token}
        status, body = await fetch_json(f"{self.endpoint}/auth/tokens", headers)
        if status != 200 or not isinstance(body, dict):
            return None, None
        data = body.get("token") or {}
        name = (data.get("user") or {}).get("name")
        if not isinstance(name, str) or not name:
            return None, None
        expires = None
        if isinstance(data.get("expires_at"), str):
            expires = datetime.fromisoformat(data["expires_at"].replace("Z", "+00:00")).timestamp()
        roles = [str(r.get("name")) for r in data.get("roles") or [] if isinstance(r, dict)]
        return authenticated(name, roles), expires
