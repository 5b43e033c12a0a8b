"""A real Shoal for the dashboard tests, and headless Chromium driven by Playwright.

Shoal runs in-process as ``shoal up`` runs it: the API, the scheduler and
every controller of ``shoal.cli.run.CONTROLLERS``, ``shoal up``'s sample
metrics and ``shoal sim`` fleet (three clusters: DE, FR, FI), plus a few
applications. The browser is Debian's Chromium (Playwright's own download
cannot run here).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shoal.api.server import ApiServer, start_api
from shoal.cli import run
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from shoal.scheduler.config import SchedulerConfig
from shoal.scheduler.scheduler import Scheduler
from shoal.sim.server import SimServer
from shoal.store.sqlite import SqliteStore
from tests.kube.conftest import application

playwright = pytest.importorskip("playwright.async_api")

CHROMIUM = Path("/usr/bin/chromium")
HAVE_CHROMIUM = CHROMIUM.exists()
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCREENSHOTS = Path(__file__).resolve().parents[1] / "output" / "ui"
# Metrics are re-read often so that a changed value moves applications within a second.
CONFIG = SchedulerConfig.model_validate(
    {"metrics_refresh": 0.5, "reschedule_after": 600, "backoff": {"initial": 0.2, "cap": 1}}
)
# name → (label constraints, labels): spread over the three clusters of the sample fleet.
APPS: dict[str, tuple[list[str], dict[str, str]]] = {
    "web": (["location in (DE, FR)"], {"tier": "web", "team": "shop"}),
    "checkout": (["location in (DE, FR)"], {"tier": "web", "team": "shop"}),
    "search": ([], {"tier": "api", "team": "shop"}),
    "reports": (["location is DE"], {"tier": "batch", "team": "finance"}),
    "ledger": (["location is DE"], {"tier": "api", "team": "finance"}),
    "edge-cache": (["location is FI"], {"tier": "web", "team": "edge"}),
    "nowhere": (["location is US"], {"tier": "batch", "team": "edge"}),
}


def up_helpers() -> Any:
    """The module of ``shoal up``'s ``_start_fleet`` and ``_sample_metrics``.

    They are moving from ``shoal.cli.run`` to ``shoal.cli.up``; either serves.
    """
    for name in ("shoal.cli.up", "shoal.cli.run"):
        with contextlib.suppress(ImportError):
            module = importlib.import_module(name)
            if hasattr(module, "_start_fleet"):
                return module
    raise ImportError("shoal up's fleet helpers")


@dataclass
class Shoal:
    api: ApiServer
    client: ShoalClient
    sim: SimServer
    running: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.api.url

    async def set_metric(self, name: str, value: float) -> None:
        """Change one value of ``shoal up``'s static provider ``sample``."""
        from shoal.model.core import GlobalMetricsProvider

        provider = await self.client.get(GlobalMetricsProvider, "sample")
        assert provider.spec.static is not None
        provider.spec.static.metrics[name] = value
        await self.client.update(provider)

    async def app(self, name: str) -> Application:
        return await self.client.get(Application, name, "default")


def app_with_labels(name: str) -> Application:
    constraints, labels = APPS[name]
    app = application(name, constraints, replicas=1)
    app.metadata.labels = labels
    return app


@pytest.fixture
async def shoal(tmp_path: Path) -> AsyncIterator[Shoal]:
    api = await start_api(SqliteStore(":memory:"))
    api.own_store = True
    client = ShoalClient(api.url)
    running: list[Any] = [Scheduler(client, CONFIG)]
    running += [build(client) for _, _, build in run.CONTROLLERS]
    sim = None
    try:
        for controller in running:
            await controller.start()
        up = up_helpers()
        await up._sample_metrics(client)
        started = await up._start_fleet(client, tmp_path, 3, 3)
        sim = started[0] if isinstance(started, tuple) else started  # (sim, restarted)
        for name in APPS:
            await client.create(app_with_labels(name))
        yield Shoal(api, client, sim, running)
    finally:
        for controller in reversed(running):
            with contextlib.suppress(Exception):
                await controller.stop()
        if sim is not None:
            await sim.stop()
        await client.close()
        await api.stop()


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
            yield (opened := Browser(page, shoal.url, errors))
            await opened.screenshot(f"last-{request.node.name}")  # what a failure looked like
        finally:
            await chromium.close()
