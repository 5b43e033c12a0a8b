"""The scheduler's and controllers' metrics, scraped by a real Prometheus and queried.

The API, the scheduler and the kube controller run in this process on sim
clusters; their metrics (the process's default registry) are served as
``--metrics-port`` serves them, Prometheus scrapes them every two seconds, and the
wall-board queries of docs/observability.md are run against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.model.base import Metadata
from shoal.model.core import (
    GlobalMetricsProvider,
    MetricsProviderSpec,
    PrometheusSpec,
)
from shoal.model.events import Event
from shoal.model.kubernetes import Application, Cluster, ClusterSpec, MetricRef
from shoal.model.scheduler_config import SchedulerConfig
from shoal.scheduler.scheduler import Scheduler
from shoal.testing import shipped
from shoal.testing.builders import app, cluster, metric, provider, register
from shoal.testing.sim import running_sim
from shoal.testing.wait import wait_for
from tests.fixtures.prometheus import PrometheusServer, start_prometheus
from tests.util import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
NS = "default"
# min_migration_interval 0: the applications follow the metrics at once (no pacing)
CONFIG = SchedulerConfig(
    stickiness=0.1, reschedule_after=0.3, metrics_refresh=0.3, min_migration_interval=0
)

#: The wall board of docs/observability.md: each query, and a label its answer must carry.
BOARD = {
    "sum by (result) (rate(shoal_scheduler_attempts_total[5m]))": "result",
    "histogram_quantile(0.99, sum by (le) "
    "(rate(shoal_scheduler_e2e_scheduling_duration_seconds_bucket[5m])))": "",
    "sum by (queue) (shoal_scheduler_queue_size)": "queue",
    'sum by (cluster, state) (shoal_applications{cluster!=""})': "cluster",
    "sum by (cause) (increase(shoal_scheduler_migrations_total[1h]))": "cause",
    "sum by (provider) (rate(shoal_metrics_provider_errors_total[5m])) > 0": "provider",
    "histogram_quantile(0.9, sum by (provider, le) "
    "(rate(shoal_metrics_provider_fetch_seconds_bucket[5m])))": "provider",
    "histogram_quantile(0.9, sum by (cluster, le) "
    "(rate(shoal_kube_apply_duration_seconds_bucket[5m])))": "cluster",
    "sum by (cluster) (rate(shoal_kube_apply_errors_total[5m]))": "",
    "sum by (component) (rate(shoal_events_written_total[5m]))": "component",
}


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


@pytest.fixture
def exporter() -> Iterator[str]:
    """This process's metrics on ``/metrics`` of a free port, as ``--metrics-port`` serves."""
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


#: Seconds between scrapes, and the time each scrape has to answer.
SCRAPE_INTERVAL = 2.0


def scrape_health(server: PrometheusServer) -> list[tuple[str, str, str]]:
    """Each target's health and last scrape error, to say why scrapes are missing."""
    response = httpx.get(f"{server.url}/api/v1/targets", timeout=5)
    active = response.json()["data"]["activeTargets"]
    return [(t["scrapeUrl"], t["health"], t["lastError"]) for t in active]


def values(server: PrometheusServer, query: str) -> list[tuple[dict[str, Any], float]]:
    return [(r["metric"], float(r["value"][1])) for r in server.query(query)]


def exposition(exporter: str) -> dict[str, Any]:
    text = httpx.get(f"http://{exporter}/metrics", timeout=5).text
    return {family.name: family for family in text_string_to_metric_families(text)}


async def test_wall_board_queries(client: ShoalClient, exporter: str) -> None:
    async with running_sim(clusters=["a", "b"], nodes=1, pod_start_delay=0.05) as sim:
        await client.create(provider("st", {"a": 0.2, "b": 0.8}))
        dead = MetricsProviderSpec(
            type="prometheus", prometheus=PrometheusSpec(url="http://127.0.0.1:9")
        )
        await client.create(GlobalMetricsProvider(metadata=Metadata(name="dead"), spec=dead))
        await client.create(metric("gone", "dead", key="up"))
        for name in ("a", "b"):
            await client.create(metric(f"m-{name}", "st", key=name))
            refs = [MetricRef(name=f"m-{name}", weight=1)]
            spec = ClusterSpec(kubeconfig=sim.clusters.kubeconfig(name), metrics=refs)
            await register(client, Cluster(metadata=Metadata(name=name, namespace=NS), spec=spec))
        await register(client, cluster("c", metrics={"gone": 1}))  # its provider is down
        components: list[Any] = [Scheduler(shipped.client(client.url, "scheduler"), CONFIG)]
        components.append(KubeController(shipped.client(client.url, "kube-controller"), resync=1.0))
        for component in components:
            await component.start()
        try:
            for name, labels in (("web-1", []), ("web-2", []), ("lost", ["zone is nowhere"])):
                await client.create(app(name, labels, namespace=NS, manifest=[configmap(name)]))

            async def deployed(cluster: str) -> bool:
                apps = (await client.list(Application, NS)).items
                on = [
                    a for a in apps if a.status.running_on and a.status.running_on.name == cluster
                ]
                return len(on) == 2

            await wait_for(lambda: deployed("b"), timeout=20, message="both on b")
            current = await client.get(GlobalMetricsProvider, "st")
            assert current.spec.static is not None
            current.spec.static.metrics = {"a": 0.9, "b": 0.1}
            await client.update(current)
            await wait_for(lambda: deployed("a"), timeout=20, message="both migrated to a")

            families = exposition(exporter)
            for name, kind in (
                ("shoal_scheduler_attempts", "counter"),
                ("shoal_scheduler_attempt_duration_seconds", "histogram"),
                ("shoal_scheduler_e2e_scheduling_duration_seconds", "histogram"),
                ("shoal_scheduler_migrations", "counter"),
                ("shoal_scheduler_queue_size", "gauge"),
                ("shoal_applications", "gauge"),
                ("shoal_metrics_provider_fetch_seconds", "histogram"),
                ("shoal_metrics_provider_errors", "counter"),
                ("shoal_kube_apply_duration_seconds", "histogram"),
                ("shoal_events_written", "counter"),
            ):
                assert families[name].type == kind, name
            queues = {
                s.labels["queue"]: s.value for s in families["shoal_scheduler_queue_size"].samples
            }
            assert set(queues) == {"ready", "backoff", "unschedulable"}
            assert queues["backoff"] + queues["unschedulable"] >= 1  # "lost" fits nowhere
            placed = {
                (s.labels["cluster"], s.labels["state"]): s.value
                for s in families["shoal_applications"].samples
            }
            assert placed[("a", "RUNNING")] == 2 and placed[("", "PENDING")] == 1

            # Prometheus gives a scrape at most one interval to answer; this process serves
            # the API, the scheduler and the controller besides its metrics, so on a loaded
            # machine an answer can take more than a second.
            interval = SCRAPE_INTERVAL
            with start_prometheus(
                {"shoal_test_up": 1.0}, targets=(exporter,), scrape_interval=f"{interval:g}s"
            ) as server:

                async def scraped_twice() -> bool:
                    return bool(
                        values(server, "count_over_time(shoal_scheduler_queue_size[1m]) >= 2")
                    )

                # Polled at a fraction of the interval, not in a tight loop: each poll is a
                # blocking call in this process, whose exporter thread must answer the scrapes.
                try:
                    await wait_for(
                        scraped_twice, timeout=15 * interval, interval=interval / 4,
                        message="two scrapes",
                    )  # fmt: skip
                except AssertionError as error:
                    raise AssertionError(f"{error}; targets: {scrape_health(server)}") from None

                async def board_answers() -> bool:
                    # a rate needs two samples of its own series, and a series can first
                    # appear after the first scrape
                    return all(values(server, query) for query, label in BOARD.items() if label)

                await wait_for(board_answers, timeout=30, interval=0.5, message="the board")
                doc = DOC.read_text()
                for query, label in BOARD.items():
                    assert query in doc, f"docs/observability.md lacks {query!r}"
                    answer = values(server, query)
                    if label:
                        assert answer and all(label in m for m, _ in answer), (query, answer)
                bound = dict(
                    (m["result"], v) for m, v in values(server, "shoal_scheduler_attempts_total")
                )
                assert bound.get("bound", 0) >= 4  # two placements and two migrations
                migrations = values(server, 'shoal_scheduler_migrations_total{cause="score"}')
                assert migrations and migrations[0][1] >= 2
                errors = values(server, 'shoal_metrics_provider_errors_total{provider="dead"}')
                assert errors and errors[0][1] >= 1
                applies = values(server, 'shoal_kube_apply_duration_seconds_count{cluster="a"}')
                assert applies and applies[0][1] >= 2
            failed = [
                e for e in (await client.list(Event, NS)).items if e.reason == "ProviderFailed"
            ]
            assert failed and re.search(
                r"UNREACHABLE_METRICS_PROVIDER: .*\(\d+ failed fetches\)", failed[0].message
            )
            assert failed[0].involved_object.kind == "GlobalMetricsProvider"
        finally:
            for component in components:
                await component.stop()
                await component.client.close()
