"""The dashboard with many applications and their events, in headless Chromium.

The API (SQLite file in a temp dir) and the scheduler run in processes of
their own; three clusters (static metrics) take N applications, and the
scheduler's event recorder writes their events. Then Debian's Chromium opens
each page afresh and the bench prints how long each took to show the data, how many
table rows the page holds, and the JavaScript heap:

- overview: until the applications counter says N and the feed is drawn;
- applications: until the table says "N of N" (paged list of 500 per request);
- one application: until its events timeline shows its Scheduled event
  (a label selector asks for that application's events only);
- one cluster: until its applications are listed.

    .venv/bin/python bench/dashboard.py [--apps 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shoal.client.rest import ShoalClient  # noqa: E402
from shoal.testing.launch import ApiProcess, controller, stop  # noqa: E402
from shoal.testing.wait import wait_for  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from reschedule import applications, create_all, placement  # noqa: E402

from shoal.testing.builders import scored_clusters  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


async def count_events(client: ShoalClient) -> int:
    total, params = 0, {"limit": 5000}
    while True:
        data = await client.request("GET", "/core/events", params=params)
        total += len(data["items"])
        params["continue"] = data["metadata"].get("continue")
        if not params["continue"]:
            return total


async def timed(page: Any, what: str, url: str, script: str, arg: Any = None) -> None:
    await page.goto("about:blank")  # each page from a fresh load, sharing nothing
    t0 = time.monotonic()
    await page.goto(url)
    # Polled with evaluate: wait_for_function polls with eval, which the dashboard's CSP refuses.
    while not await page.evaluate(script, arg):
        if time.monotonic() - t0 > 120:
            raise TimeoutError(f"{what}: {script} still false after 120 s")
        await asyncio.sleep(0.01)
    seconds = time.monotonic() - t0
    heap = await page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
    rows = await page.evaluate("document.querySelectorAll('tr, .vt-row, li').length")
    print(f"  {what:<13} {seconds:6.2f} s   {rows:5d} rows/items   JS heap {heap / 2**20:5.1f} MB")


async def browse(url: str, m: int) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = await (await browser.new_context(viewport={"width": 1440, "height": 900})).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        print(f"  {'page':<13} {'shown':>8}")
        await timed(
            page,
            "overview",
            f"{url}/ui/#/overview",
            "n => document.getElementById('stat-apps')?.textContent === String(n)"
            " && document.querySelector('.feed li') !== null",
            m,
        )
        partial = await page.evaluate("document.body.innerText.includes('Too many stored events')")
        await timed(
            page,
            "applications",
            f"{url}/ui/#/applications",
            "n => document.getElementById('apps-count')?.textContent === `${n} of ${n}`",
            f"{m:,}",
        )
        await timed(
            page,
            "application",
            f"{url}/ui/#/applications/default/a00042",
            "() => [...document.querySelectorAll('#events li')].some(li =>"
            " li.textContent.includes('Scheduled'))",
        )
        await timed(
            page,
            "cluster",
            f"{url}/ui/#/clusters/default/a",
            "() => document.querySelectorAll('a[href^=\"#/applications/default/\"]').length > 0",
        )
        await browser.close()
        print(f"  overview feed: {'the newest (too many to list)' if partial else 'every event'}")
        print(f"  page errors: {len(errors)}")


async def run(m: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{Path(tmp) / 'shoal.db'}", secured=False)
        procs = [api.proc]
        try:
            await api.wait_ready()
            procs.append(controller("scheduler", api.url))
            async with ShoalClient(api.url) as client:
                await scored_clusters(client, {"a": 0.6, "b": 0.5, "c": 0.4})
                await create_all(client, m, 32)

                async def placed() -> bool:
                    return placement(await applications(client)).get("-", 0) == 0

                t0 = time.monotonic()
                await wait_for(placed, timeout=600, interval=1.0, message="all placed")
                print(f"  placed in {time.monotonic() - t0:.1f} s (after creation)")
                await asyncio.sleep(3)  # the recorder's last flush
                print(f"  {m} applications, {await count_events(client)} events stored")
            await browse(api.url, m)
        finally:
            for proc in reversed(procs):
                stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=10_000)
    args = parser.parse_args()
    asyncio.run(run(args.apps))


if __name__ == "__main__":
    main()
