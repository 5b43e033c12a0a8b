"""A real Shoal for the dashboard tests (``tests.ui.running``), and headless Chromium driven
by Playwright. The browser is Debian's Chromium (Playwright's own download cannot run here).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shoal.testing import shipped
from tests.ui.running import APPS, Shoal, app_with_labels, running_shoal

__all__ = ["APPS", "Browser", "Shoal", "app_with_labels"]

playwright = pytest.importorskip("playwright.async_api")

CHROMIUM = Path("/usr/bin/chromium")
HAVE_CHROMIUM = CHROMIUM.exists()
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCREENSHOTS = Path(__file__).resolve().parents[1] / "output" / "ui"


@pytest.fixture
async def shoal(tmp_path: Path) -> AsyncIterator[Shoal]:
    async with running_shoal(tmp_path) as running:
        yield running


@dataclass
class Browser:
    """One page of Chromium on the dashboard, with the console errors it logged."""

    page: Any
    base: str
    errors: list[str]

    async def open(self, route: str) -> None:
        await self.page.goto(f"{self.base}/ui/#/{route}")

    async def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        await self.page.evaluate("document.querySelectorAll('.toast').forEach(t => t.remove())")
        await asyncio.sleep(0.3)  # let the last frame paint
        await self.page.screenshot(path=str(path), full_page=True)
        return path


async def sign_in(browser: Browser, token: str) -> None:
    """Paste ``token`` in the dashboard's token box, as a user of ``shoal up`` does with the
    admin token it prints; it stays for the tab's session."""
    await browser.open("overview")
    await browser.page.fill("#token", token)
    await browser.page.click("#token-form button")
    await browser.page.locator("#live.on").wait_for()  # the overview's streams are open
    browser.errors.clear()  # the 401s of the page before the token: it asked to sign in


@pytest.fixture
async def browser(shoal: Shoal, request: pytest.FixtureRequest) -> AsyncIterator[Browser]:
    if not HAVE_CHROMIUM:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    async with playwright.async_playwright() as driver:
        chromium = await driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            context = await chromium.new_context(viewport={"width": 1440, "height": 900})
            page = await context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.set_default_timeout(20_000)
            opened = Browser(page, shoal.url, errors)
            await sign_in(opened, shipped.token(shipped.ADMIN))
            yield opened
            await opened.screenshot(f"last-{request.node.name}")  # what a failure looked like
        finally:
            await chromium.close()
