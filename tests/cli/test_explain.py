"""``shoal kube app explain`` and ``dryrun`` against a real API and scheduler."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shoal.client.rest import ShoalClient
from shoal.model import core
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, Cluster, ClusterSpec, MetricRef
from shoal.scheduler.scheduler import Scheduler
from shoal.testing.fleet import KUBECONFIG, register
from shoal.testing.shipped import Callers
from tests.cli.conftest import Shoal
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
