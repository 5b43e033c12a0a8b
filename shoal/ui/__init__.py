"""The web dashboard: static pages that ``shoal api`` serves under ``/ui/``.

The pages are plain ES modules that talk to the same REST API as every other
client (lists with paging, watch streams, a bearer token when one is given),
so serving them needs nothing but static files.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import RedirectResponse
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


def mount(app: FastAPI, prefix: str = "/ui") -> None:
    """Serve the dashboard at ``prefix + "/"``; ``prefix`` alone redirects there."""

    async def redirect() -> RedirectResponse:
        return RedirectResponse(prefix + "/")

    app.add_api_route(prefix, redirect, methods=["GET"], include_in_schema=False)
    app.mount(prefix, StaticFiles(directory=STATIC, html=True), name="ui")
