"""What Krake's end-to-end suite expects of cluster states, back-off and migration pacing.

Each test does what one of Krake 1.0.1's ``test_scheduling.py`` and
``test_kubernetes_migration.py`` tests does, with Krake's JSON on Shoal's API as
``shoal up`` secures it, and ``shoal sim`` clusters under Shoal's scheduler, kube
controller and observer (each with its own identity):

- a cluster whose metric is unknown is ONLINE once registered; ranking an
  application that sets ``backoff_limit: 1`` finds it failing: the application
  is FAILED, the cluster FAILING_METRICS with UNKNOWN_METRIC;
- of two clusters, the one whose provider is unreachable is FAILING_METRICS, the
  application runs on the other (with metrics, or without), ONLINE without reasons;
- an application with ``backoff_limit: 1`` and only an OFFLINE cluster is FAILED;
- metrics that keep favouring the other cluster move the application at most once
  per interval, counted from the move the test saw complete.
"""

from __future__ import annotations

import copy
import time
from datetime import datetime
from typing import Any

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import NotFound, ShoalClient
from shoal.sim.server import SimServer
from shoal.testing.launch import free_port
from shoal.testing.shipped import Callers
from shoal.testing.sim import running_sim
from tests.scheduler import helpers as h
from tests.util import wait_for

pytestmark = [pytest.mark.integration]

NS = h.NS
CLUSTERS = f"/kubernetes/namespaces/{NS}/clusters"
APPS = f"/kubernetes/namespaces/{NS}/applications"
MANIFEST = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "echo"}, "data": {"a": "b"}}
]


async def _register(
    client: ShoalClient, name: str, kubeconfig: dict[str, Any], metrics: tuple[str, ...] = ()
) -> None:
    """``rok kube cluster register -k ... -m METRIC 1``: Krake's JSON."""
    body = {
        "api": "kubernetes",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"kubeconfig": kubeconfig, "metrics": [{"name": m, "weight": 1} for m in metrics]},
    }
    await client.request("POST", CLUSTERS, body=body)


async def _create_app(client: ShoalClient, name: str, **spec: Any) -> None:
    """``rok kube app create -f manifest.yaml [--backoff_limit N]``: Krake's JSON."""
    body = {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {"manifest": MANIFEST, **spec},
    }
    await client.request("POST", APPS, body=body)


async def _get(client: ShoalClient, path: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.request("GET", path)
    return got


def _state_is(client: ShoalClient, path: str, state: str) -> Any:
    async def check() -> dict[str, Any] | None:
        got = await _get(client, path)
        return got if got["status"]["state"] == state else None

    return check


def _offline(sim: SimServer, name: str) -> dict[str, Any]:
    """The cluster's kubeconfig with its server on a port nothing listens on."""
    config = copy.deepcopy(sim.kubeconfig(name))
    scheme = config["clusters"][0]["cluster"]["server"].partition("://")[0]
    config["clusters"][0]["cluster"]["server"] = f"{scheme}://127.0.0.1:{free_port()}"
    return config


async def _unreachable_metric(client: ShoalClient, name: str) -> None:
    """A GlobalMetric ``name`` of a Prometheus nothing listens for (Krake's JSON)."""
    closed = f"http://127.0.0.1:{free_port()}"
    await client.request(
        "POST",
        "/core/globalmetricsproviders",
        body={
            "api": "core",
            "kind": "GlobalMetricsProvider",
            "metadata": {"name": "prometheus-unreachable"},
            "spec": {"type": "prometheus", "prometheus": {"url": closed}},
        },
    )
    await client.request(
        "POST",
        "/core/globalmetrics",
        body={
            "api": "core",
            "kind": "GlobalMetric",
            "metadata": {"name": name},
            "spec": {
                "min": 0,
                "max": 5,
                "provider": {"name": "prometheus-unreachable", "metric": name},
            },
        },
    )


async def test_metric_not_in_database(
    api: ApiServer, client: ShoalClient, client_of: Callers
) -> None:
    async with running_sim(clusters=["c1"], nodes=1, pod_start_delay=0.05) as sim:
        async with h.stack(client_of, h.fast_config(metrics_refresh=0.2)) as sch:
            await _register(client, "c1", sim.kubeconfig("c1"), ("heat_demand_zone_missing",))
            await wait_for(_state_is(client, f"{CLUSTERS}/c1", "ONLINE"), timeout=10)
            await wait_for(lambda: h.metric_state_synced(sch, "c1"), timeout=5, message="synced")
            registered = await _get(client, f"{CLUSTERS}/c1")
            assert registered["status"]["state"] == "ONLINE"  # Krake's check after registering

            await _create_app(client, "echo", backoff_limit=1)
            app = await wait_for(_state_is(client, f"{APPS}/echo", "FAILED"), timeout=15)
            assert app["status"]["reason"]["code"] == "NO_SUITABLE_RESOURCE"
            cluster = await _get(client, f"{CLUSTERS}/c1")
            assert cluster["status"]["state"] == "FAILING_METRICS"
            reasons = cluster["status"]["metrics_reasons"]
            assert reasons["heat_demand_zone_missing"]["code"] == "UNKNOWN_METRIC"


async def test_one_unreachable_metrics_provider(
    api: ApiServer, client: ShoalClient, client_of: Callers
) -> None:
    await _unreachable_metric(client, "heat_demand_zone_unreachable")
    await h.static_metrics(client, {"heat_demand_zone_1": 0.5})
    config = h.fast_config(metrics_refresh=0.2, metrics_timeout=0.5)
    async with running_sim(clusters=["c1", "c2"], nodes=1, pod_start_delay=0.05) as sim:
        async with h.stack(client_of, config):
            await _register(client, "c1", sim.kubeconfig("c1"), ("heat_demand_zone_unreachable",))
            await _register(client, "c2", sim.kubeconfig("c2"), ("heat_demand_zone_1",))
            for name in ("c1", "c2"):
                await wait_for(_state_is(client, f"{CLUSTERS}/{name}", "ONLINE"), timeout=10)
            await _create_app(client, "echo")
            app = await wait_for(_state_is(client, f"{APPS}/echo", "RUNNING"), timeout=15)
            assert app["status"]["running_on"]["name"] == "c2"
            expected = await _get(client, f"{CLUSTERS}/c2")
            assert expected["status"]["state"] == "ONLINE"
            assert expected["status"]["metrics_reasons"] == {}
            other = await wait_for(
                _state_is(client, f"{CLUSTERS}/c1", "FAILING_METRICS"), timeout=5
            )
            reasons = other["status"]["metrics_reasons"]
            assert reasons["heat_demand_zone_unreachable"]["code"] == "UNREACHABLE_METRICS_PROVIDER"


async def test_all_unreachable_metrics_provider(
    api: ApiServer, client: ShoalClient, client_of: Callers
) -> None:
    await _unreachable_metric(client, "heat_demand_zone_unreachable")
    config = h.fast_config(metrics_refresh=0.2, metrics_timeout=0.5)
    async with running_sim(clusters=["c1", "c2"], nodes=1, pod_start_delay=0.05) as sim:
        async with h.stack(client_of, config):
            await _register(client, "c1", sim.kubeconfig("c1"), ("heat_demand_zone_unreachable",))
            await _register(client, "c2", sim.kubeconfig("c2"))
            for name in ("c1", "c2"):
                await wait_for(_state_is(client, f"{CLUSTERS}/{name}", "ONLINE"), timeout=10)
            await _create_app(client, "echo")
            app = await wait_for(_state_is(client, f"{APPS}/echo", "RUNNING"), timeout=15)
            assert app["status"]["running_on"]["name"] == "c2"  # the one without metrics
            failing = await wait_for(
                _state_is(client, f"{CLUSTERS}/c1", "FAILING_METRICS"), timeout=5
            )
            reasons = failing["status"]["metrics_reasons"]
            assert reasons["heat_demand_zone_unreachable"]["code"] == "UNREACHABLE_METRICS_PROVIDER"
            without = await _get(client, f"{CLUSTERS}/c2")
            assert without["status"]["state"] == "ONLINE"
            assert without["status"]["metrics_reasons"] == {}


async def test_cluster_not_online(
    api: ApiServer, client: ShoalClient, client_of: Callers
) -> None:
    async with running_sim(clusters=["c1"], nodes=1) as sim:
        async with h.stack(client_of, h.fast_config()):
            await _register(client, "failing", _offline(sim, "c1"))
            await _create_app(client, "echo", backoff_limit=1)
            app = await wait_for(_state_is(client, f"{APPS}/echo", "FAILED"), timeout=20)
            assert app["status"]["scheduled_to"] is None
            await wait_for(_state_is(client, f"{CLUSTERS}/failing", "OFFLINE"), timeout=10)


INTERVAL = 3.0


async def test_fluctuating_metrics_move_once_per_interval(
    api: ApiServer, client: ShoalClient, client_of: Callers
) -> None:
    await h.static_metrics(client, {"m-a": 0.9, "m-b": 0.1})
    config = h.fast_config(min_migration_interval=INTERVAL, metrics_refresh=0.1)
    async with running_sim(clusters=["a", "b"], nodes=1, pod_start_delay=0.05) as sim:
        async with h.stack(client_of, config):
            for name in ("a", "b"):
                await _register(client, name, sim.kubeconfig(name), (f"m-{name}",))
                await wait_for(_state_is(client, f"{CLUSTERS}/{name}", "ONLINE"), timeout=10)
            await _create_app(client, "echo")

            async def running_on(cluster: str) -> dict[str, Any] | None:
                got = await _get(client, f"{APPS}/echo")
                on = (got["status"].get("running_on") or {}).get("name")
                return got if got["status"]["state"] == "RUNNING" and on == cluster else None

            await wait_for(lambda: running_on("a"), timeout=15, message="RUNNING on a")
            seen = time.time()  # as Krake's suite: when the test saw it run there
            here, there = "a", "b"
            for _ in range(3):
                values = {f"m-{there}": 0.9, f"m-{here}": 0.1}
                await h.set_static(client, values)
                moved = await wait_for(
                    lambda to=there: running_on(to), timeout=INTERVAL * 4, message=f"to {there}"
                )
                scheduled = datetime.fromisoformat(moved["status"]["scheduled"])
                assert scheduled.timestamp() - seen >= INTERVAL
                seen = time.time()
                here, there = there, here


async def test_a_cluster_registered_again_under_its_name_starts_online(
    api: ApiServer, client: ShoalClient, client_of: Callers
) -> None:
    """Krake's suite registers ``c1`` with a failing metric in one test, deletes it, and
    registers ``c1`` again in the next: the new cluster is ONLINE, whatever a ranking
    found of the old one."""
    await _unreachable_metric(client, "heat_demand_zone_unreachable")
    await h.static_metrics(client, {"heat_demand_zone_1": 0.5})
    config = h.fast_config(metrics_refresh=0.2, metrics_timeout=0.5)
    async with running_sim(clusters=["c1", "c2"], nodes=1, pod_start_delay=0.05) as sim:
        async with h.stack(client_of, config) as sch:
            await _register(client, "c1", sim.kubeconfig("c1"), ("heat_demand_zone_unreachable",))
            await _register(client, "c2", sim.kubeconfig("c2"), ("heat_demand_zone_1",))
            for name in ("c1", "c2"):
                await wait_for(_state_is(client, f"{CLUSTERS}/{name}", "ONLINE"), timeout=10)
            await _create_app(client, "echo")
            await wait_for(_state_is(client, f"{APPS}/echo", "RUNNING"), timeout=15)
            await wait_for(_state_is(client, f"{CLUSTERS}/c1", "FAILING_METRICS"), timeout=5)

            for path in (f"{APPS}/echo", f"{CLUSTERS}/c1", f"{CLUSTERS}/c2"):
                await client.request("DELETE", path)
            for path in (f"{APPS}/echo", f"{CLUSTERS}/c1", f"{CLUSTERS}/c2"):
                await wait_for(lambda p=path: _gone(client, p), timeout=15, message=f"{path} gone")

            await _register(client, "c1", sim.kubeconfig("c1"), ("heat_demand_zone_unreachable",))
            await wait_for(_state_is(client, f"{CLUSTERS}/c1", "ONLINE"), timeout=10)
            await wait_for(lambda: h.metric_state_synced(sch, "c1"), timeout=5, message="synced")
            again = await _get(client, f"{CLUSTERS}/c1")
            assert again["status"]["state"] == "ONLINE"
            assert again["status"]["metrics_reasons"] == {}


async def _gone(client: ShoalClient, path: str) -> bool:
    try:
        await client.request("GET", path)
    except NotFound:
        return True
    return False
