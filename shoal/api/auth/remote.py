"""Fetching JSON from identity providers (OIDC discovery and JWKS, Keystone)."""

from __future__ import annotations

from typing import Any

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=5)


async def fetch_json(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(status, decoded body or None); a connection failure is status 0.

    A session per call: these calls are rare (results are cached), and a
    session that outlives no request needs no closing at shutdown.
    """
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.get(url, headers=headers) as response:
                if response.status != 200:
                    return response.status, None
                return 200, await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return 0, None
