"""Builders shared by the scheduler tests: resources, a fast config, a running scheduler."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    MetricProviderRef,
    MetricSpec,
    MetricsProviderSpec,
    StaticSpec,
)
from shoal.model.infrastructure import (
    Cloud,
    CloudSpec,
    GlobalCloud,
    OpenstackAuth,
    OpenstackSpec,
    PasswordAuth,
    PasswordProject,
    PasswordUser,
)
from shoal.model.kubernetes import (
    Application,
    ApplicationSpec,
    Cluster,
    ClusterConstraints,
    ClusterSpec,
    Constraints,
    MetricRef,
)
from shoal.scheduler.config import SchedulerConfig
from shoal.scheduler.scheduler import Scheduler

NS = "default"
KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "ctx",
}


def fast_config(**overrides: Any) -> SchedulerConfig:
    data: dict[str, Any] = {
        "backoff": {"initial": 0.1, "factor": 2, "cap": 0.5},
        "reschedule_after": 30.0,
        "metrics_refresh": 0.2,
        "workers": 8,
    }
    data.update(overrides)
    return SchedulerConfig.model_validate(data)


def provider(name: str, metrics: dict[str, float]) -> GlobalMetricsProvider:
    return GlobalMetricsProvider(
        metadata=Metadata(name=name),
        spec=MetricsProviderSpec(type="static", static=StaticSpec(metrics=metrics)),
    )


def metric(name: str, provider_name: str = "static", lo: float = 0, hi: float = 1) -> GlobalMetric:
    return GlobalMetric(
        metadata=Metadata(name=name),
        spec=MetricSpec(
            min=lo, max=hi, provider=MetricProviderRef(name=provider_name, metric=name)
        ),
    )


def cluster(
    name: str,
    labels: dict[str, str] | None = None,
    metrics: dict[str, float] | None = None,
    crds: list[str] | None = None,
    kubeconfig: bool = True,
) -> Cluster:
    return Cluster(
        metadata=Metadata(name=name, namespace=NS, labels=labels or {}),
        spec=ClusterSpec(
            kubeconfig=KUBECONFIG if kubeconfig else None,
            metrics=[MetricRef(name=m, weight=w) for m, w in (metrics or {}).items()],
            custom_resources=crds or [],
        ),
    )


def app(
    name: str,
    labels: list[str] | None = None,
    metrics: list[str] | None = None,
    crds: list[str] | None = None,
    migration: bool = True,
) -> Application:
    return Application(
        metadata=Metadata(name=name, namespace=NS),
        spec=ApplicationSpec(
            constraints=Constraints(
                migration=migration,
                cluster=ClusterConstraints(
                    labels=labels or [], metrics=metrics or [], custom_resources=crds or []
                ),
            )
        ),
    )


def openstack(metrics: dict[str, float] | None = None) -> CloudSpec:
    return CloudSpec(
        openstack=OpenstackSpec(
            url="https://keystone.example:5000/v3",
            auth=OpenstackAuth(
                password=PasswordAuth(
                    user=PasswordUser(username="u", password="p"),
                    project=PasswordProject(name="p"),
                )
            ),
            metrics=[MetricRef(name=m, weight=w) for m, w in (metrics or {}).items()],
        )
    )


def cloud(name: str, labels: dict[str, str] | None = None, **kw: Any) -> Cloud:
    return Cloud(
        metadata=Metadata(name=name, namespace=NS, labels=labels or {}), spec=openstack(**kw)
    )


def global_cloud(name: str, labels: dict[str, str] | None = None, **kw: Any) -> GlobalCloud:
    return GlobalCloud(metadata=Metadata(name=name, labels=labels or {}), spec=openstack(**kw))


@contextlib.asynccontextmanager
async def running(url: str, config: SchedulerConfig | None = None) -> AsyncIterator[Scheduler]:
    """A scheduler with its own client, started and synced, stopped on exit."""
    async with ShoalClient(url) as client:
        sch = Scheduler(client, config or fast_config())
        await sch.start()
        try:
            yield sch
        finally:
            await sch.stop()


async def get_app(client: ShoalClient, name: str) -> Application:
    return await client.get(Application, name, NS)


async def bound_to(client: ShoalClient, name: str) -> str | None:
    a = await get_app(client, name)
    return a.status.scheduled_to.name if a.status.scheduled_to else None


async def settle(seconds: float = 0.3) -> None:
    await asyncio.sleep(seconds)
