"""``describe``, ``-o wide`` and ``cordon|uncordon|drain`` against a running Shoal whose
clusters are ``shoal sim`` clusters (scheduler, kube controller, observer, task controller)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import Result

from shoal.model.kubernetes import Application, Cluster
from shoal.model.placement_spec import Placement
from shoal.testing import shipped
from shoal.testing.wait import wait_for
from tests.cli.conftest import invoke, ok
from tests.kube.conftest import application
from tests.ui.running import APPS, Shoal, app_with_labels, running_shoal

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Shoal]:
    async with running_shoal(tmp_path) as shoal:
        # the CLI as shoal up leaves it: its configuration names the API and the admin's token
        config = shipped.client_config(tmp_path / "shoal-up", shoal.url)
        monkeypatch.setenv("SHOAL_CONFIG", str(config))
        await wait_for(lambda: _settled(shoal), timeout=30, message="applications running")
        yield shoal


async def _where(shoal: Shoal) -> dict[str, str | None]:
    """Where each application is scheduled, once it also runs there (None: nowhere)."""
    apps = (await shoal.client.list(Application, "default")).items
    out: dict[str, str | None] = {}
    for app in apps:
        s = app.status
        on = s.scheduled_to.name if s.scheduled_to else None
        out[app.metadata.name] = on if s.running_on == s.scheduled_to else "moving"
    return out


async def _settled(shoal: Shoal) -> bool:
    where = await _where(shoal)
    return all(where.get(n) not in (None, "moving") for n in APPS if n != "nowhere")


def _field(page: str, key: str) -> str | None:
    """The value of a ``Key:  value`` line of a describe page."""
    found = re.search(rf"^{key}:\s+(.*)$", page, re.M)
    return found.group(1) if found else None


async def shoal_cli(shoal: Shoal, *args: str) -> Result:
    result: Result = await invoke("--api", shoal.url, *args)
    return result


async def _describe_and_wide_lists(demo: Shoal) -> None:
    where = await _where(demo)
    web = where["web"]
    assert web in ("sim-1", "sim-2")

    scheduled = re.compile(r"Normal\s+Scheduled\s+scheduler\s+\d+\s+Scheduled to")

    async def described() -> str | None:
        """The page once it lists the Scheduled event: the scheduler's recorder writes its
        events about a second after the first one, and the applications may run sooner."""
        page = ok(await shoal_cli(demo, "kube", "app", "describe", "web")).output
        return page if scheduled.search(page) else None

    page = await wait_for(described, timeout=10, interval=0.2, message="web's Scheduled event")
    assert "Name:" in page and "web" in page
    assert _field(page, "Scheduled to") == web
    assert "location in (DE, FR)" in page  # the constraint
    assert "Last decision:" in page and "RANK" in page and "TERMS" in page
    assert "REJECTED BY" in page and "label location in (DE, FR)" in page  # sim-3 (FI)

    cluster = ok(await shoal_cli(demo, "kube", "cluster", "describe", "sim-1")).output
    assert _field(cluster, "Unschedulable") == "no"
    assert "3/3 ready" in cluster and "n-" in cluster  # nodes from the observer
    here = [n for n, c in where.items() if c == "sim-1"]
    assert here and all(f"\n  {n} " in cluster for n in here)
    assert re.search(r"\n  web\s+\S+\s+all\s", cluster) or web != "sim-1", cluster

    # an application on two clusters: each cluster's page lists it with its share
    spread = application("spread", ["location in (DE, FR)"], replicas=4)
    spread.spec.placement = Placement(clusters=2, replicas="divided")
    await demo.client.create(spread)

    async def on_two() -> Application | None:
        app = await demo.app("spread")
        return app if len(app.status.placements) == 2 else None

    placed = await wait_for(on_two, timeout=20, message="spread on two clusters")
    assert {p.cluster.name for p in placed.status.placements} == {"sim-1", "sim-2"}
    for name in ("sim-1", "sim-2"):
        page = ok(await shoal_cli(demo, "kube", "cluster", "describe", name)).output
        assert re.search(r"\n  spread\s+\S+\s+2 of 4\s", page), page
    missing = await shoal_cli(demo, "kube", "cluster", "describe", "no-such")
    assert missing.exit_code != 0 and "no-such" in missing.output

    plain = ok(await shoal_cli(demo, "kube", "app", "list")).output.splitlines()[0].split()
    wide = ok(await shoal_cli(demo, "get", "apps", "-o", "wide")).output.splitlines()
    assert "SCORE" not in plain
    wide_columns = ["SCORE", "PLACEMENTS", "ATTEMPTS", "PLACED", "LABELS", "CONDITIONS"]
    assert wide[0].split()[-6:] == wide_columns
    row = next(line for line in wide if line.split()[1] == "web")
    assert "team=shop,tier=web" in row or "tier=web,team=shop" in row
    clusters = ok(await shoal_cli(demo, "kube", "cluster", "list", "-o", "wide")).output
    header = clusters.splitlines()[0].split()
    assert header[-5:] == ["NODES", "CUSTOM_RESOURCES", "MODE", "AGENT", "HEARTBEAT"]
    assert "3/3" in clusters
    assert all(line.split()[header.index("MODE")] == "push"
               for line in clusters.splitlines()[1:])  # fmt: skip


async def _cordon_uncordon_drain(demo: Shoal) -> None:
    client = demo.client
    assert "cluster default/sim-1 cordoned" in ok(
        await shoal_cli(demo, "kube", "cluster", "cordon", "sim-1")
    ).output
    again = ok(await shoal_cli(demo, "kube", "cluster", "cordon", "sim-1")).output
    assert "already cordoned" in again
    listed = ok(await shoal_cli(demo, "kube", "cluster", "list")).output
    assert "ONLINE,SchedulingDisabled" in next(x for x in listed.splitlines() if "sim-1" in x)

    APPS["de-late"] = (["location is DE"], {"tier": "batch", "team": "late"})
    try:
        await client.create(app_with_labels("de-late"))
    finally:
        del APPS["de-late"]

    async def waiting() -> str | None:
        app = await client.get(Application, "de-late", "default")
        return app.status.reason.message if app.status.reason else None

    assert "cordoned" in await wait_for(waiting, timeout=15, message="de-late waits")
    page = ok(await shoal_cli(demo, "kube", "app", "describe", "de-late")).output
    assert "1 cordoned" in page
    assert "(cordoned)" in ok(await shoal_cli(demo, "kube", "cluster", "describe", "sim-1")).output

    ok(await shoal_cli(demo, "kube", "cluster", "uncordon", "sim-1"))
    assert not (await client.get(Cluster, "sim-1", "default")).spec.unschedulable

    async def placed() -> bool:
        return (await _where(demo)).get("de-late") == "sim-1"

    await wait_for(placed, timeout=20, message="de-late on sim-1 after uncordon")

    # sim-2 (FR): everything there can go elsewhere; the drain waits until it is empty.
    # spread's share there counts: it moves to sim-1, the one other cluster in DE or FR
    before = await _where(demo)
    on_two = sorted(n for n, c in before.items() if c == "sim-2" and n != "spread")
    drained = ok(await shoal_cli(demo, "kube", "cluster", "drain", "sim-2", "--timeout", "60"))
    moved = f"{len(on_two) + 1} applications moved (1 of them a share of its replicas)"
    assert f"cluster default/sim-2 drained: {moved}" in drained.output, drained.output
    after = await _where(demo)
    assert all(after[n] not in ("sim-2", "moving", None) for n in on_two), after
    spread = await demo.app("spread")
    assert [(p.cluster.name, p.replicas) for p in spread.status.placements] == [("sim-1", 4)]
    assert {c.cluster.name for c in spread.status.copies} == {"sim-1"}
    assert (await client.get(Cluster, "sim-2", "default")).spec.unschedulable
    again = ok(await shoal_cli(demo, "kube", "cluster", "drain", "sim-2", "--timeout", "30"))
    assert "cluster default/sim-2 drained: 0 applications moved" in again.output, again.output
    unknown = await shoal_cli(demo, "kube", "cluster", "drain", "no-such")
    assert unknown.exit_code != 0 and "no-such" in unknown.output

    # sim-1 (DE) holds applications that may only run in DE: they stay, and say why.
    result = await shoal_cli(demo, "kube", "cluster", "drain", "sim-1", "--timeout", "60")
    assert result.exit_code == 1, result.output
    assert "NoSuitableCluster" in result.output
    assert "drained except:" in result.output
    for name in ("reports", "ledger", "de-late"):
        assert name in result.output.split("drained except:")[1]


async def test_describe_wide_and_maintenance(demo: Shoal) -> None:
    """One Shoal for both (its start is most of the time): describe and lists first, since
    the maintenance commands then move applications around."""
    await _describe_and_wide_lists(demo)
    await _cordon_uncordon_drain(demo)
