"""Group ``scheduling``: dry-run placement of an application (binds nothing).

The dry run uses the scheduler's own framework and plugins, with the configuration the
running scheduler published (the SchedulerConfiguration ``scheduler``, which every
scheduler publishes whatever its lease's name; the defaults while there is none), over
the namespace's clusters as stored, with metric values from a metric cache kept by this
API process (refreshed at most once per ``metrics_refresh`` seconds). So it answers what
the scheduler would decide now, with every score term and every rejection.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Body, Path
from starlette.responses import Response

from shoal.api.batch import add_batch_route
from shoal.api.codec import decode
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.machinery.names import MAX_OBJECT_NAME, OBJECT_NAME
from shoal.model.core import GlobalMetric, GlobalMetricsProvider, Metric, MetricsProvider
from shoal.model.kubernetes import Application, Cluster
from shoal.model.scheduler_config import SchedulerConfig
from shoal.model.scheduling import LEASE_LABEL, PUBLISHED_AS, SchedulerConfiguration
from shoal.model.subresources import BindingBatch
from shoal.scheduler import plugins as _plugins  # noqa: F401  (registers built-in plugins)
from shoal.scheduler.backends import Backends
from shoal.scheduler.framework import Framework
from shoal.scheduler.metrics.cache import MetricCache
from shoal.scheduler.requests import cluster_backend, request_for
from shoal.store.base import NotFound

NAME_PATTERN = OBJECT_NAME.pattern


class DryRun:
    def __init__(self, resources: Resources) -> None:
        self.resources = resources
        self.lease = PUBLISHED_AS  # the lease of the scheduler that published the configuration
        self._configure(SchedulerConfig(), 0)

    def _configure(self, config: SchedulerConfig, revision: int) -> None:
        """Decide with ``config``, the SchedulerConfiguration at ``revision`` (0: none,
        the defaults)."""
        self.config = config
        self.revision = revision
        self.framework = Framework(config.plugins)
        self.metrics = MetricCache(
            refresh_interval=config.metrics_refresh, timeout=config.metrics_timeout
        )
        self._refreshed = 0.0

    async def _sync_config(self) -> str:
        """Decide with what the scheduler published; say which configuration that is."""
        key = SchedulerConfiguration.key(PUBLISHED_AS)
        try:
            record = await self.resources.store.get(key)
        except NotFound:
            if self.revision != 0:
                await self._reconfigure(SchedulerConfig(), 0)
            return "defaults: no scheduler has published its configuration"
        if record.revision != self.revision:
            published = decode(SchedulerConfiguration, record.value, record.revision)
            await self._reconfigure(published.spec, record.revision)
            self.lease = published.metadata.labels.get(LEASE_LABEL, PUBLISHED_AS)
        if self.lease != PUBLISHED_AS:
            return f"schedulerconfigurations/{PUBLISHED_AS} (scheduler of lease {self.lease})"
        return f"schedulerconfigurations/{PUBLISHED_AS}"

    async def _reconfigure(self, config: SchedulerConfig, revision: int) -> None:
        """``_configure``, and close the metric cache it replaces (its HTTP session, opened
        by the dry runs before the scheduler published its configuration)."""
        replaced = self.metrics
        self._configure(config, revision)
        await replaced.close()

    async def _sync_metrics(self) -> None:
        store = self.resources.store
        for kind in (GlobalMetric, Metric, GlobalMetricsProvider, MetricsProvider):
            records, _ = await store.list(kind.key_prefix())
            for record in records:
                obj: Any = decode(kind, record.value, record.revision)
                if kind in (GlobalMetric, Metric):
                    self.metrics.set_metric(obj)
                else:
                    self.metrics.set_provider(obj)
        if time.monotonic() - self._refreshed > self.config.metrics_refresh:
            await self.metrics.refresh_now()
            self._refreshed = time.monotonic()

    async def run(self, app: Application, namespace: str) -> dict[str, Any]:
        app.metadata.namespace = namespace
        configuration = await self._sync_config()
        await self._sync_metrics()
        backends = Backends(cluster_backend, self.metrics)
        records, _ = await self.resources.store.list(Cluster.key_prefix(namespace))
        for record in records:
            backends.set(decode(Cluster, record.value, record.revision))
        request = request_for(app, self.config)
        decision = self.framework.decide(request, backends.group(namespace), explain_all=True)
        result = decision.explanation()
        result["available"] = decision.available
        result["total"] = decision.total
        result["configuration"] = configuration
        return result


def build_router(resources: Resources) -> APIRouter:
    router = APIRouter(route_class=StrictJsonRoute)
    dry = DryRun(resources)

    async def dryrun(
        namespace: str = Path(min_length=1, max_length=MAX_OBJECT_NAME, pattern=NAME_PATTERN),
        body: Application = Body(),
    ) -> Response:
        import orjson

        result = await dry.run(body, namespace)
        return Response(orjson.dumps(result), media_type="application/json")

    add_batch_route(
        router,
        "/scheduling/bindings",
        BindingBatch,
        resources.bind_many,
        name="bind_applications",
        summary="Bind many applications in one request; each binding is its own compare-and-swap",
        item="a binding of `PUT .../applications/{name}/binding`",
        problems="409 on a stale resource_version, 404, 422",
    )
    router.add_api_route(
        "/scheduling/namespaces/{namespace}/dryrun",
        dryrun,
        methods=["POST"],
        name="dryrun_application",
        summary="Where would this application be placed now, and why (binds nothing)",
        tags=["scheduling"],
    )
    return router
