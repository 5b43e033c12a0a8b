"""Builders for the resources a scheduling test or bench creates: clusters, applications, metrics.

One definition each, so tests, benches and ``shoal up``'s sample metrics build
the same objects the same way.
"""

from __future__ import annotations

from typing import Any

from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricProviderRef,
    MetricSpec,
    MetricsProvider,
    MetricsProviderSpec,
    StaticSpec,
)
from shoal.model.kubernetes import (
    Application,
    Cluster,
    ClusterSpec,
    ClusterState,
    MetricRef,
)

NS = "default"


def kubeconfig(name: str = "c", server: str = "https://127.0.0.1:6443") -> dict[str, Any]:
    """A kubeconfig the API accepts: one cluster at ``server``, one token user, one context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": f"{name}-user", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-user"}}],
        "current-context": name,
    }


# Enough for the scheduler (which never connects); the kube tests use the sim's own.
KUBECONFIG: dict[str, Any] = kubeconfig()
TOSCA: dict[str, Any] = {
    "tosca_definitions_version": "tosca_simple_yaml_1_0",
    "topology_template": {
        "node_templates": {"node": {"type": "tosca.nodes.Compute"}},
        "outputs": {"kubeconfig": {"value": "set by the infrastructure provider"}},
    },
}
"""The template of a cluster to be created on a cloud (a cluster needs it or a kubeconfig)."""


def provider(name: str, metrics: dict[str, float]) -> GlobalMetricsProvider:
    """A static provider serving ``metrics`` (name → value)."""
    return GlobalMetricsProvider(
        metadata=Metadata(name=name),
        spec=MetricsProviderSpec(type="static", static=StaticSpec(metrics=metrics)),
    )


def namespaced_provider(name: str, metrics: dict[str, float]) -> MetricsProvider:
    """A static provider in ``NS`` serving ``metrics``: only Metrics of ``NS`` read it."""
    return MetricsProvider(
        metadata=Metadata(name=name, namespace=NS),
        spec=MetricsProviderSpec(type="static", static=StaticSpec(metrics=metrics)),
    )


def metric(
    name: str,
    provider_name: str = "static",
    lo: float = 0,
    hi: float = 1,
    *,
    key: str | None = None,
) -> GlobalMetric:
    """A GlobalMetric in [lo, hi] read from ``provider_name`` under ``key`` (default: its name)."""
    return GlobalMetric(
        metadata=Metadata(name=name),
        spec=MetricSpec(
            min=lo, max=hi, provider=MetricProviderRef(name=provider_name, metric=key or name)
        ),
    )


def namespaced_metric(name: str, provider_name: str, key: str) -> Metric:
    """A Metric in ``NS`` in [0, 1] read from the provider ``provider_name`` of ``NS``."""
    return Metric(
        metadata=Metadata(name=name, namespace=NS),
        spec=MetricSpec(min=0, max=1, provider=MetricProviderRef(name=provider_name, metric=key)),
    )


def cluster(
    name: str,
    labels: dict[str, str] | None = None,
    metrics: dict[str, float] | None = None,
    crds: list[str] | None = None,
    kubeconfig: bool = True,
) -> Cluster:
    """A cluster in ``NS`` with ``metrics`` (metric name → weight).

    Without ``kubeconfig`` it is a cluster still to be created on a cloud (a TOSCA template).
    """
    return Cluster(
        metadata=Metadata(name=name, namespace=NS, labels=labels or {}),
        spec=ClusterSpec(
            kubeconfig=KUBECONFIG if kubeconfig else None,
            tosca={} if kubeconfig else TOSCA,
            metrics=[MetricRef(name=m, weight=w) for m, w in (metrics or {}).items()],
            custom_resources=crds or [],
        ),
    )


def manifest(name: str) -> list[dict[str, Any]]:
    """The smallest manifest the API accepts: one ConfigMap named after the application."""
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}]


configmap = manifest  # ``app``'s own default, under a name its ``manifest`` option leaves free


def app(
    name: str,
    labels: list[str] | None = None,
    metrics: list[str] | None = None,
    crds: list[str] | None = None,
    migration: bool = True,
    *,
    namespace: str = NS,
    manifest: list[dict[str, Any]] | None = None,
    metadata_labels: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> Application:
    """An application in ``namespace`` with the given cluster constraints: its
    ``manifest`` (one ConfigMap named after it unless given), and any other spec field
    as the API reads it (``placement``, ``backoff_limit``, ``observer_schema``…)."""
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "labels": metadata_labels or {}},
        "spec": {
            "manifest": configmap(name) if manifest is None else manifest,
            "constraints": {
                "migration": migration,
                "cluster": {
                    "labels": labels or [], "metrics": metrics or [], "custom_resources": crds or []
                },
            },
            **spec,
        },
    }
    if status is not None:
        body["status"] = status
    return Application.model_validate(body)


def deployment(
    name: str, image: str = "nginx", requests: dict[str, str] | None = None, replicas: int = 1
) -> dict[str, Any]:
    """A Deployment whose pods carry ``app: NAME`` (a manifest for applications)."""
    container: dict[str, Any] = {"name": "main", "image": image}
    if requests:
        container["resources"] = {"requests": requests}
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


async def register(
    client: ShoalClient, cluster: Cluster, state: ClusterState = ClusterState.ONLINE
) -> Cluster:
    """Create a cluster and report it ``state``, as the cluster observer would on reaching it.

    A registered cluster starts CONNECTING (or PENDING without a kubeconfig) and only the
    observer makes it ONLINE; the clusters of scheduling tests and benches lead nowhere, so
    this stands in for that first observation.
    """
    created = await client.create(cluster)
    created.status.state = state
    return await client.update_status(created)


async def set_state(
    client: ShoalClient, name: str, state: ClusterState, namespace: str = NS
) -> Cluster:
    """Report cluster ``name`` in ``state``, as the observer would (``OFFLINE`` to fail over)."""
    cluster = await client.get(Cluster, name, namespace)
    cluster.status.state = state
    return await client.update_status(cluster)


async def scored_clusters(client: ShoalClient, scores: dict[str, float]) -> None:
    """One cluster per entry whose one metric (``m-NAME``, static) is worth its score."""
    await client.create(provider("st", scores))
    for name in scores:
        await client.create(metric(f"m-{name}", "st", key=name))
        await register(client, cluster(name, metrics={f"m-{name}": 1}, kubeconfig=False))
