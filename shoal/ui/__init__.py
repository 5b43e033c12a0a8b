"""The web dashboard: static pages that ``shoal api`` serves under ``/ui/``.

The pages are plain ES modules that talk to the same REST API as every other
client (lists with paging, watch streams, a bearer token when one is given),
so serving them needs nothing but static files.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.responses import RedirectResponse
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""The pages' own files only (vendored, no inline script): a script injected into a page
cannot run, load code or send data elsewhere, and no other site may frame the dashboard."""
HEADERS = [
    (b"content-security-policy", POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class _WithHeaders:
    """Adds ``HEADERS`` to every answer of the app it wraps."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def mount(app: FastAPI, prefix: str = "/ui") -> None:
    """Serve the dashboard at ``prefix + "/"``; ``prefix`` alone redirects there."""

    async def redirect() -> RedirectResponse:
        return RedirectResponse(prefix + "/")

    app.add_api_route(prefix, redirect, methods=["GET"], include_in_schema=False)
    app.mount(prefix, _WithHeaders(StaticFiles(directory=STATIC, html=True)), name="ui")
