"""``shoal kube app explain`` and ``dryrun`` against a real API and scheduler."""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shoal.client.rest import ShoalClient
from shoal.model import core
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, Cluster, ClusterSpec, MetricRef
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import builders as sample
from shoal.testing.builders import KUBECONFIG, register
from shoal.testing.shipped import Callers
from tests.cli.conftest import Shoal, invoke
from tests.security.conftest import TOKENS, Secured
from tests.util import wait_for

MANIFEST = """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
"""


@pytest.fixture
async def fleet(client: ShoalClient) -> AsyncIterator[None]:
    await client.create(
        core.GlobalMetricsProvider(
            metadata=Metadata(name="st"),
            spec=core.MetricsProviderSpec(
                type="static", static=core.StaticSpec(metrics={"green": 0.7})
            ),
        )
    )
    await client.create(
        core.GlobalMetric(
            metadata=Metadata(name="green"),
            spec=core.MetricSpec(
                min=0, max=1, provider=core.MetricProviderRef(name="st", metric="green")
            ),
        )
    )
    for name, location, metrics in (
        ("de-1", "DE", True),
        ("fr-1", "FR", True),
        ("de-2", "DE", False),
    ):
        refs = [MetricRef(name="green", weight=1)] if metrics else []
        await register(
            client,
            Cluster(
                metadata=Metadata(name=name, namespace="default", labels={"location": location}),
                spec=ClusterSpec(metrics=refs, kubeconfig=KUBECONFIG),
            ),
        )
    yield


async def test_dryrun_ranks_and_explains(shoal: Shoal, fleet: None, tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    result = await shoal(
        "kube", "app", "dryrun", "-f", str(manifest), "-L", "location is DE", "-o", "json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["chosen"] == "de-1"
    assert data["score"] == pytest.approx(0.7)
    assert data["summary"] == "2/3 clusters available: 1 label location is DE, 1 without metrics"
    rejected = {r["reason"]: r["clusters"] for r in data["rejected"]}
    assert rejected == {"label location is DE": ["fr-1"], "without metrics": ["de-2"]}

    table = await shoal("kube", "app", "dryrun", "-f", str(manifest), "-L", "location is DE")
    assert table.exit_code == 0, table.output
    assert "de-1" in table.output and "label location is DE" in table.output


async def test_explain_shows_the_last_decision(
    shoal: Shoal, fleet: None, client: ShoalClient, client_of: Callers, tmp_path: Path
) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    scheduler = Scheduler(client_of("scheduler"))
    await scheduler.start()
    try:
        created = await shoal(
            "kube", "app", "create", "web", "-f", str(manifest), "-L", "location is FR"
        )
        assert created.exit_code == 0, created.output

        async def bound() -> bool:
            app = await client.get(Application, "web", "default")
            return app.status.scheduled_to is not None

        await wait_for(bound, message="web bound")
        result = await shoal("kube", "app", "explain", "web", "-o", "json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["chosen"] == "fr-1"
        assert data["summary"].startswith("1/3 clusters available: 2 label location is FR")
        table = await shoal("kube", "app", "explain", "web")
        assert "fr-1" in table.output
    finally:
        await scheduler.stop()
        await scheduler.client.close()


async def test_explain_and_describe_name_the_fallback_cluster_chosen_as_alice(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The best-scoring cluster is a backup; the placement's first group chose the primary."""
    url = secured.server.url
    async with ShoalClient(url, token=TOKENS["admin"]) as admin:
        await admin.create(sample.provider("st", {"best": 0.9, "worse": 0.2}))
        for name, key, tier in (("backup", "best", "backup"), ("primary", "worse", "primary")):
            await admin.create(sample.metric(f"m-{name}", "st", key=key))
            cluster = sample.cluster(name, labels={"tier": tier}, metrics={f"m-{name}": 1})
            cluster.metadata.namespace = "a"
            await sample.register(admin, cluster)
        scheduler = Scheduler(ShoalClient(url, token=TOKENS["admin"]))
        await scheduler.start()
        try:
            monkeypatch.setenv("SHOAL_TOKEN", TOKENS["alice"])
            app = sample.app("web").model_dump(mode="json", exclude_none=True)
            app["metadata"]["namespace"] = "a"
            app["spec"]["placement"] = {
                "clusters": 1, "fallback": ["tier is primary", "tier is backup"]}  # fmt: skip
            answer = await secured["alice"].post("/kubernetes/namespaces/a/applications", json=app)
            assert answer.status_code == 200, answer.text

            async def placed() -> Application | None:
                found = await admin.get(Application, "web", "a")
                return found if found.status.placements else None

            bound = await wait_for(placed, message="web placed")
            assert [p.cluster.name for p in bound.status.placements] == ["primary"]
            assert bound.status.scheduling is not None
            assert bound.status.scheduling["ranking"][0]["cluster"] == "backup"  # best score
            assert bound.status.scheduling["chosen"] == "primary"
            assert bound.status.scheduling["chosen_clusters"] == ["primary"]

            explained = await invoke("--api", url, "kube", "app", "explain", "web", "-n", "a")
            assert explained.exit_code == 0, explained.output
            assert "chosen: primary (score 0.2000)" in explained.output
            page = await invoke("--api", url, "kube", "app", "describe", "web", "-n", "a")
            assert page.exit_code == 0, page.output
            chosen = [line for line in page.output.splitlines() if "Chosen:" in line]
            assert chosen and "primary" in chosen[0] and "backup" not in chosen[0], page.output
        finally:
            await scheduler.stop()
            await scheduler.client.close()


async def test_a_dry_run_leaves_no_session_open_when_the_scheduler_publishes(
    secured: Secured, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """``shoal up``'s first start: the demo's dry run ran on the defaults, then the scheduler
    published its configuration and the API's dry runs took it, dropping the metric cache
    (and its HTTP session) of the defaults: "Unclosed client session" in api.log."""
    url = secured.server.url
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    monkeypatch.setenv("SHOAL_TOKEN", TOKENS["alice"])
    async with ShoalClient(url, token=TOKENS["admin"]) as admin:
        await admin.create(sample.provider("st", {"green": 0.7}))
        await admin.create(sample.metric("green", "st"))
        cluster = sample.cluster("de-1", metrics={"green": 1})
        cluster.metadata.namespace = "a"
        await sample.register(admin, cluster)

        async def dry_run() -> dict[str, Any]:
            args = ("kube", "app", "dryrun", "-n", "a", "-f", str(manifest), "-o", "json")
            result = await invoke("--api", url, *args)
            assert result.exit_code == 0, result.output
            answer: dict[str, Any] = json.loads(result.output)
            assert answer["chosen"] == "de-1"
            return answer

        assert (await dry_run())["configuration"].startswith("defaults")
        scheduler = Scheduler(ShoalClient(url, token=TOKENS["admin"]))
        await scheduler.start()
        try:
            async def published() -> bool:
                return not (await dry_run())["configuration"].startswith("defaults")

            with caplog.at_level(logging.ERROR, logger="asyncio"):
                await wait_for(published, message="the dry run on the published configuration")
                gc.collect()
            assert "Unclosed client session" not in caplog.text
        finally:
            await scheduler.stop()
            await scheduler.client.close()
