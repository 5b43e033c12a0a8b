"""The dashboard in headless Chromium against a real Shoal: every page with real data,
live updates without a reload, a migration seen on the application's page, the
reschedule button, and a clean console."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shoal.api.server import start_api
from shoal.model.kubernetes import Application, Cluster
from shoal.model.placement_spec import Placement
from shoal.model.pods import Pod
from shoal.model.scheduling import RescheduleTask
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import shipped
from shoal.testing.pods import FleetAgents
from shoal.testing.pods import pod as fleet_pod
from shoal.testing.wait import wait_for
from tests.ui.conftest import APPS, Browser, Shoal, app_with_labels

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def _text(browser: Browser, selector: str) -> str:
    return str(await browser.page.locator(selector).first.inner_text())


async def _until(page: Any, expression: str, arg: Any = None) -> None:
    """Until ``expression`` is true in the page, polled from here with ``evaluate``.

    Not Playwright's ``wait_for_function``: it polls its predicate with ``eval`` in the page,
    which the dashboard's Content-Security-Policy refuses, so it failed whenever the
    condition was not already true at the first look.
    """
    await wait_for(lambda: page.evaluate(expression, arg), 30, 0.1, expression)


async def _count(browser: Browser, text: str) -> None:
    """Until the applications page says it shows ``text`` (e.g. "2 of 7")."""
    script = "t => document.getElementById('apps-count')?.textContent.startsWith(t)"
    await _until(browser.page, script, text)


async def _placed(shoal: Shoal, name: str) -> str | None:
    app = await shoal.app(name)
    return app.status.scheduled_to.name if app.status.scheduled_to else None


async def _all_placed(shoal: Shoal) -> bool:
    placed = [await _placed(shoal, name) for name in APPS if name != "nowhere"]
    return all(placed)


async def test_every_page_renders_real_data(shoal: Shoal, browser: Browser) -> None:
    await wait_for(lambda: _all_placed(shoal), timeout=30, message="applications placed")
    page = browser.page

    await browser.open("overview")
    await _until(page, "document.getElementById('stat-apps')?.textContent === '7'")
    for name in ("sim-1", "sim-2", "sim-3"):
        await page.locator(".tile", has_text=name).wait_for()
    await page.locator(".feed li", has_text="Scheduled").first.wait_for()
    await browser.screenshot("overview")

    await browser.open("clusters")
    row = page.locator("#clusters-table tr[data-cluster='sim-1']")
    await row.locator("text=3/3 nodes ready").wait_for()
    assert "location=DE" in await row.inner_text()
    assert "free_capacity_1" in await row.inner_text()
    await browser.screenshot("clusters")

    await browser.open("clusters/default/sim-2")
    await page.locator("td", has_text="n-2").wait_for()
    await page.locator("a", has_text="web").wait_for()
    assert await page.locator("#cordon", has_text="Cordon").is_enabled()
    await page.locator("#events li", has_text="CONNECTING → ONLINE").wait_for()  # an Event
    await browser.screenshot("cluster")

    await browser.open("applications")
    await _count(browser, "7 of 7")
    await page.locator(".vt-row", has_text="edge-cache").wait_for()
    await page.fill("#filter-selector", "team=finance")
    await page.press("#filter-selector", "Enter")
    await _count(browser, "2 of 2")
    await page.fill("#filter-selector", "")
    await page.press("#filter-selector", "Enter")
    await page.select_option("#filter-state", "FAILED")
    await _count(browser, "1 of 7")
    await page.select_option("#filter-state", "")
    await browser.screenshot("applications")

    await browser.open("applications/default/web")
    await page.locator("#decision .bars [data-cluster='sim-2']").wait_for()
    assert "label location in (DE, FR)" in await _text(browser, "#decision")
    await browser.screenshot("application")
    await page.click("#dry-run")  # every cluster with every score term
    await page.locator("#decision h2", has_text="Dry run").wait_for()
    await page.locator(
        "#decision .bars [data-cluster='sim-1'] span[title^='free_capacity_1']"
    ).wait_for()
    await page.click("#create-task")
    await page.locator(".toast", has_text="Reschedule task created").wait_for()

    await browser.open("metrics")
    await page.locator("[data-provider='sample']", has_text="ONLINE").wait_for()
    row = "#metric-values tr[data-cluster='sim-2'][data-metric='free_capacity_2']"
    value = page.locator(f"{row} .value")
    await value.filter(has_text="0.74").wait_for()
    await browser.screenshot("metrics")

    task = RescheduleTask.model_validate(
        {"metadata": {"name": "back-to-fr"}, "spec": {"target_clusters": ["sim-2"]}}
    )
    await shoal.client.create(task)
    await browser.open("tasks")
    await page.locator("#tasks-table tr[data-task^='ui-web-']", has_text="Finished").wait_for()
    await page.locator("#tasks-table tr[data-task='back-to-fr']", has_text="Finished").wait_for()
    assert "3/3 done" in await _text(browser, "#tasks-table tr[data-task='back-to-fr']")
    await browser.screenshot("tasks")

    await browser.open("applications/default/nowhere")
    await page.locator("#decision", has_text="label location is US").wait_for()
    await page.click("#retry")  # FAILED: scheduled again, retries reset
    await page.locator(".page-head .badge", has_text="PENDING").wait_for()

    assert browser.errors == []


async def test_created_application_appears_without_reload(shoal: Shoal, browser: Browser) -> None:
    await browser.open("applications")
    page = browser.page
    await page.locator(".vt-row", has_text="checkout").wait_for()
    await page.evaluate("window.notReloaded = true")
    APPS["late"] = (["location is FI"], {"tier": "web", "team": "late"})
    try:
        await shoal.client.create(app_with_labels("late"))
    finally:
        del APPS["late"]
    await page.locator(".vt-row", has_text="late").filter(has_text="sim-3").wait_for()
    assert await page.evaluate("window.notReloaded") is True
    assert browser.errors == []


async def test_migration_and_reschedule_button(shoal: Shoal, browser: Browser) -> None:
    """A better metric elsewhere moves `web`; stickiness then keeps it there until the
    reschedule button asks for a pass without stickiness, which moves it back."""
    await wait_for(lambda: _placed(shoal, "web"), timeout=30, message="web placed")
    assert await _placed(shoal, "web") == "sim-2"
    await browser.open("applications/default/web")
    page = browser.page
    await page.locator(".page-head", has_text="on sim-2").wait_for()

    await shoal.set_metric("free_capacity_1", 0.99)
    await page.locator("#migrations li", has_text="sim-2 → sim-1").wait_for(timeout=30_000)
    await page.locator(".page-head", has_text="on sim-1").wait_for()
    await page.locator("#decision .bars .winner", has_text="sim-1").wait_for()

    # Worse than sim-2 without stickiness (0.633 < 0.647), better with it (0.656).
    await shoal.set_metric("free_capacity_1", 0.7)
    scheduler: Any = next(c for c in shoal.running if isinstance(c, Scheduler))
    await wait_for(
        lambda: (
            getattr(scheduler.metrics.lookup("free_capacity_1", False, None), "value", None) == 0.7
        ),
        message="the scheduler sees the new value",
    )
    await page.click("#reschedule")
    await page.locator("#migrations li", has_text="sim-1 → sim-2").wait_for(timeout=30_000)
    await page.locator(".page-head", has_text="on sim-2").wait_for()
    assert await _placed(shoal, "web") == "sim-2"
    await browser.screenshot("application-migrated")
    assert browser.errors == []


async def test_token_goes_with_every_request(shoal: Shoal, browser: Browser) -> None:
    """Once a token is entered, lists and watches carry it; the one entered last."""
    page = browser.page
    sent: list[tuple[str, str | None]] = []
    page.on(
        "request",
        lambda r: (
            sent.append((r.url, r.headers.get("authorization")))
            if "/kubernetes/" in r.url
            else None
        ),
    )
    admin = shipped.token(shipped.ADMIN)  # the browser fixture signed in with it
    await page.reload()
    await page.locator(".tile", has_text="sim-1").wait_for()
    assert sent and {auth for _, auth in sent} == {f"Bearer {admin}"}
    sent.clear()
    await page.fill("#token", "s3cret")  # a token the API refuses: it goes all the same
    await page.click("#token-form button")
    await page.locator(".sign-in", has_text="refused this token").wait_for()
    await _until(page, "() => sessionStorage.getItem('shoal.token') === 's3cret'")
    assert sent and {auth for _, auth in sent} == {"Bearer s3cret"}
    sent.clear()
    await page.fill("#token", admin)
    await page.click("#token-form button")
    await page.locator(".tile", has_text="sim-1").wait_for()
    await page.locator("#live.on").wait_for()  # a watch stream is open
    assert any("watch" in url for url, _ in sent)
    assert {auth for _, auth in sent} == {f"Bearer {admin}"}


async def test_metric_values_follow_the_provider(shoal: Shoal, browser: Browser) -> None:
    """The metrics page shows a changed value at once and keeps its history while open."""
    await browser.open("metrics")
    page = browser.page
    row = page.locator("#metric-values tr[data-cluster='sim-1'][data-metric='free_capacity_1']")
    await row.locator(".value", has_text="0.37").wait_for()
    for value in (0.9, 0.55, 0.8, 0.45):
        await shoal.set_metric("free_capacity_1", value)
        await row.locator(".value", has_text=str(value)).wait_for()
    points = await row.locator("polyline").get_attribute("points")
    assert points is not None and len(points.split()) >= 5
    await browser.screenshot("metrics-history")
    assert browser.errors == []


async def _on_sim_2(shoal: Shoal) -> list[str]:
    apps = (await shoal.client.list(Application, "default")).items
    return [
        a.metadata.name
        for a, s in ((a, a.status) for a in apps)
        if any(r is not None and r.name == "sim-2" for r in (s.scheduled_to, s.running_on))
    ]


async def test_cordon_and_drain_buttons(shoal: Shoal, browser: Browser) -> None:
    """Cordon and uncordon flip spec.unschedulable; drain (confirmed by a second click) moves
    every application off; the events and the migration history show it."""
    await wait_for(lambda: _all_placed(shoal), timeout=30, message="applications placed")
    assert "web" in await _on_sim_2(shoal)
    page = browser.page
    await browser.open("clusters/default/sim-2")
    head = page.locator(".page-head")
    await page.click("#cordon")
    await head.locator(".badge", has_text="CORDONED").wait_for()
    await page.locator("#cordon", has_text="Uncordon").wait_for()
    assert (await shoal.client.get(Cluster, "sim-2", "default")).spec.unschedulable
    await page.click("#cordon")
    await page.locator("#cordon", has_text="Cordon").wait_for()
    await head.locator(".badge", has_text="CORDONED").wait_for(state="detached")
    assert not (await shoal.client.get(Cluster, "sim-2", "default")).spec.unschedulable

    await page.click("#drain")
    await page.locator("#drain", has_text="Confirm drain").wait_for()
    assert not (await shoal.client.get(Cluster, "sim-2", "default")).spec.unschedulable
    await page.click("#drain")
    await page.locator(".toast", has_text="Draining: reschedule task drain-sim-2-").wait_for()
    await head.locator("#left", has_text="empty").wait_for(timeout=30_000)
    assert await _on_sim_2(shoal) == []
    await browser.screenshot("cluster-drained")

    await browser.open("applications/default/web")
    await page.locator("#migrations li", has_text="sim-2 → sim-1").wait_for()
    await page.locator("#events li", has_text="RescheduleRequested").wait_for()
    await page.locator("#events li", has_text="Migrated from sim-2").wait_for()
    await browser.open("overview")
    await page.locator(".tile", has_text="cordoned").wait_for()
    await page.locator(".feed li", has_text="Migrated").first.wait_for()
    await browser.screenshot("overview-drained")
    assert browser.errors == []


async def test_fleet_pods_page(shoal: Shoal, browser: Browser) -> None:
    """Pods placed by the agents of the sim clusters show on the clusters' nodes, live."""
    agents = FleetAgents(shoal.client)
    try:
        for name in shoal.sim.clusters.clusters:
            await agents.start_on(shoal.sim, name)
        page = browser.page
        await browser.open("pods")
        await page.locator("#pods-waiting", has_text="Every fleet pod is placed").wait_for()
        for i in range(6):
            await shoal.client.create(fleet_pod(f"p-{i}", cpu="500m", memory="256Mi"))
        await _until(page, "document.getElementById('stat-pods')?.textContent === '6'")

        async def placed() -> bool:
            pods = (await shoal.client.list(Pod, "default")).items
            return all(p.status.phase == "Scheduled" for p in pods)

        await wait_for(placed, timeout=30, message="fleet pods placed")
        cards = page.locator("#pod-clusters section[data-cluster]")
        await _until(
            page,
            "() => [...document.querySelectorAll('#pod-clusters .pods')]"
            ".reduce((n, dd) => n + parseInt(dd.textContent), 0) === 6",
        )
        assert await cards.count() == 3
        # The sampler may place all six anywhere: look at a cluster that holds one, and its
        # node, as the API says.
        pod = (await shoal.client.list(Pod, "default")).items[0]
        card = page.locator(f"#pod-clusters section[data-cluster='{pod.status.cluster}']")
        assert pod.status.node in await card.inner_text()  # nodes with their requests
        await browser.screenshot("pods")
        assert browser.errors == []
    finally:
        await agents.close()


async def test_without_a_token_the_dashboard_asks_to_sign_in(tmp_path: Path) -> None:
    """An API that wants a token: the page says "Sign in" rather than showing zeros, and
    shows the overview once a token is entered."""
    from tests.security.conftest import TOKENS, security
    from tests.ui.conftest import ARGS, CHROMIUM, HAVE_CHROMIUM, playwright

    if not HAVE_CHROMIUM:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    server = await start_api(f"sqlite://{tmp_path / 'shoal.db'}", security=security(tmp_path))
    try:
        async with playwright.async_playwright() as driver:
            chromium = await driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = await (await chromium.new_context()).new_page()
                page.set_default_timeout(20_000)
                await page.goto(f"{server.url}/ui/#/overview")
                await page.locator(".sign-in h2", has_text="Sign in").wait_for()
                assert "answers only with a token" in await page.inner_text("#main")
                await page.fill("#token", "wrong")
                await page.click("#token-form button")
                await page.locator(".sign-in", has_text="refused this token").wait_for()
                await page.fill("#token", TOKENS["admin"])
                await page.click("#token-form button")
                await page.locator("#live.on").wait_for()  # the overview's streams are open
                assert await page.locator(".sign-in").count() == 0
            finally:
                await chromium.close()
    finally:
        await server.stop()


async def spread_on_both(shoal: Shoal, browser: Browser) -> None:
    """The application ``spread``, 4 replicas divided over two clusters, shown on its page
    with 2 ready on each of sim-1 and sim-2."""
    app = app_with_labels("web")
    app.metadata.name = "spread"
    app.spec.manifest[0]["metadata"]["name"] = "spread"
    app.spec.manifest[0]["spec"]["replicas"] = 4
    app.spec.placement = Placement(clusters=2, replicas="divided")
    await shoal.client.create(app)
    await browser.open("applications/default/spread")
    placements = browser.page.locator("#placements")
    await placements.filter(has_text="sim-1 2/2 ready").wait_for()
    await placements.filter(has_text="sim-2 2/2 ready").wait_for()


async def test_an_application_on_several_clusters(shoal: Shoal, browser: Browser) -> None:
    """Its page lists each cluster with its ready replicas; the list shows every cluster."""
    await spread_on_both(shoal, browser)
    page = browser.page
    await browser.screenshot("application-placements")
    await browser.open("applications")
    row = page.locator(".vt-row", has_text="spread")
    await row.filter(has_text="sim-1 (2/2)").filter(has_text="sim-2 (2/2)").wait_for()
    assert browser.errors == []


async def test_several_clusters_page_follows_moved_shares_and_a_cluster_back(
    shoal: Shoal, browser: Browser
) -> None:
    """sim-2 goes OFFLINE: its share moves to sim-1 (ShareMoved in the migration history) and
    the decision rejects sim-2 "not ONLINE". sim-2 comes back: no cluster replaced it, so
    its empty slot is filled again by itself, and the panel follows the new decision."""
    await spread_on_both(shoal, browser)
    page = browser.page
    await page.locator("#chosen", has_text="sim-1, sim-2").or_(
        page.locator("#chosen", has_text="sim-2, sim-1")).wait_for()  # fmt: skip

    shoal.sim.clusters.set_unreachable("sim-2")
    moved = page.locator("#migrations li", has_text="sim-2 → sim-1")
    await moved.filter(has_text="share moved").wait_for(timeout=30_000)
    rejected = page.locator("#decision tr", has_text="not ONLINE")
    await rejected.filter(has_text="sim-2").wait_for()
    await page.locator("#chosen", has_text="sim-1").wait_for()
    assert await page.locator("#since").count() == 0  # the decision is current

    shoal.sim.clusters.set_unreachable("sim-2", False)

    async def refilled() -> bool:
        return sorted(await _placed_shares(shoal, "spread")) == [("sim-1", 2), ("sim-2", 2)]

    await wait_for(refilled, timeout=60, message="sim-2's empty slot filled again")
    await page.locator("#decision tr", has_text="not ONLINE").wait_for(state="detached")
    await page.locator("#chosen", has_text="sim-1, sim-2").or_(
        page.locator("#chosen", has_text="sim-2, sim-1")).wait_for()  # fmt: skip
    await browser.screenshot("application-share-moved")
    assert browser.errors == []


async def _placed_shares(shoal: Shoal, name: str) -> list[tuple[str, int | None]]:
    app = await shoal.app(name)
    return [(p.cluster.name, p.replicas) for p in app.status.placements]


async def test_an_application_created_again_has_only_its_own_events(
    shoal: Shoal, browser: Browser
) -> None:
    """Events belong to a uid: `again`, deleted and created under the same name, does not
    show the first one's Unschedulable on its page."""
    from shoal.client.rest import NotFound

    first = app_with_labels("nowhere")  # location is US: no cluster
    first.metadata.name = "again"
    first.spec.manifest[0]["metadata"]["name"] = "again"
    await shoal.client.create(first)
    page = browser.page
    await browser.open("applications/default/again")
    await page.locator("#events li", has_text="Unschedulable").first.wait_for(timeout=30_000)

    await shoal.client.delete(Application, "again", "default")

    async def gone() -> bool:
        try:
            await shoal.app("again")
        except NotFound:
            return True
        return False

    await wait_for(gone, message="the first again deleted")
    second = app_with_labels("web")
    second.metadata.name = "again"
    second.spec.manifest[0]["metadata"]["name"] = "again"
    await shoal.client.create(second)
    await browser.open("applications/default/again")
    await page.locator("#events li", has_text="Scheduled").first.wait_for(timeout=30_000)
    events = await _text(browser, "#events")
    assert "Unschedulable" not in events, events


async def test_a_short_placement_shows_degraded(shoal: Shoal, browser: Browser) -> None:
    """Three clusters asked for, two that fit: RUNNING with a Degraded badge saying why."""
    app = app_with_labels("web")
    app.metadata.name = "short"
    app.spec.manifest[0]["metadata"]["name"] = "short"
    app.spec.placement = Placement(clusters=3)
    await shoal.client.create(app)
    page = browser.page
    await browser.open("applications/default/short")
    await page.locator(".page-head .badge", has_text="RUNNING").wait_for()
    badge = page.locator(".badge.degraded")
    await badge.wait_for()
    title = await badge.get_attribute("title")
    assert title == (
        "on 2 of 3 clusters asked for: 2/3 clusters available: 1 label location in (DE, FR)"
    )
    await page.locator("#degraded", has_text="on 2 of 3 clusters asked for").wait_for()
    await browser.open("applications")
    row = page.locator(".vt-row", has_text="short")
    await row.locator(".badge.degraded").wait_for()
    assert browser.errors == []
