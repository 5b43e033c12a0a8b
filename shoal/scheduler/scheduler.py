"""The scheduler process: informers, a work queue, and the placement handlers.

No polling and no per-application list calls: informers keep applications,
clusters, clouds, metrics and providers in memory; events put keys on the
queue; workers run the framework and commit through the binding subresource
with a resource_version precondition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from shoal.client.informer import Informer
from shoal.client.rest import ApiError, Conflict, NotFound, ShoalClient, Unreachable
from shoal.controllers.base import Controller
from shoal.model.base import Kind, Metadata, Reason
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
)
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import AppKey, Application, Cluster, ClusterState
from shoal.model.scheduler_config import SchedulerConfig
from shoal.model.scheduling import LEASE_LABEL, PUBLISHED_AS, SchedulerConfiguration
from shoal.scheduler import plugins as _plugins  # noqa: F401  (registers built-in plugins)
from shoal.scheduler import stats
from shoal.scheduler.application import ApplicationHandler
from shoal.scheduler.backends import Backend, Backends
from shoal.scheduler.cloud import CloudHandler, cloud_backend
from shoal.scheduler.eviction import Eviction
from shoal.scheduler.framework import Framework
from shoal.scheduler.handler import Outcome
from shoal.scheduler.metrics.cache import MetricCache
from shoal.scheduler.metrics.status import ProviderStatusWriter
from shoal.scheduler.placed import ClusterIndex
from shoal.scheduler.pods.pipeline import FleetPipeline
from shoal.scheduler.report import watch_state
from shoal.scheduler.requests import backend_fits, cluster_backend, request_for
from shoal.scheduler.triggers import settled
from shoal.scheduler.watched import (
    cloud_key,
    cluster_key,
    kept,
    key_of,
    reads,
    ref_key,
)

log = logging.getLogger(__name__)


class Scheduler(Controller):
    """The application scheduler. At start it publishes its configuration (unless
    ``publish`` is false, as on a Krake API), labelled with ``lease_name``, the lease it
    runs under."""

    def __init__(
        self,
        client: ShoalClient,
        config: SchedulerConfig | None = None,
        *,
        publish: bool = True,
        lease_name: str = PUBLISHED_AS,
    ) -> None:
        from shoal.machinery.workqueue import WorkQueue

        super().__init__()
        self.client = client
        self.config = config or SchedulerConfig()
        self.publish = publish
        self.lease_name = lease_name
        self.metrics = MetricCache(
            refresh_interval=self.config.metrics_refresh,
            timeout=self.config.metrics_timeout,
            on_change=self._metrics_changed,
        )
        self.framework = Framework(
            self.config.plugins,
            explain_names=self.config.explain_names,
            ranking=self.config.explain_ranking,
        )
        self.clusters = Backends(cluster_backend, self.metrics)
        self.clouds = Backends(cloud_backend, self.metrics, include_global=True)
        self.apps_handler = ApplicationHandler(client, self.config, self.clusters, self.framework)
        # clusters a ranking found with failing metrics: FAILING_METRICS until they recover;
        # by uid, so that a cluster registered again under the same name starts ONLINE
        self.ranked_failing: dict[tuple[str | None, str], str | None] = {}
        self.apps_handler.on_failing_metrics = self._ranked_failing
        self.cloud_handler = CloudHandler(client, self.config, self.clouds, self.framework)
        self.queue: WorkQueue[AppKey] = WorkQueue()
        self.cluster_queue: WorkQueue[AppKey] = WorkQueue()
        self.waiting: set[AppKey] = set()  # applications no cluster fits yet
        self.placed = ClusterIndex(emptied=self._check_eviction)
        self.passes = 0
        self.eviction = Eviction(
            client,
            lambda where: self.placed.on_cluster.get(where, set()),
            lambda key: self.app_informer.get(key[1], key[0]),
            self.apps_handler.wants_pass,
            lambda where: self.placed.copies_on.get(where, set()),
        )
        self.app_informer: Informer[Application] = Informer(
            client,
            Application,
            on_add=self._app_added,
            on_update=self._app_updated,
            on_delete=self._app_deleted,
            reads=reads,
            keep=kept,
        )
        self.cluster_informer: Informer[Cluster] = Informer(
            client, Cluster, on_change=self._cluster_changed, on_delete=self._cluster_deleted
        )
        self.informers: list[Informer[Any]] = [
            self.app_informer,
            self.cluster_informer,
            *(
                Informer(client, kind, on_change=self._cloud_changed, on_delete=self._cloud_deleted)
                for kind in (Cloud, GlobalCloud)
            ),
        ]
        definitions: list[Informer[Any]] = [
            self._definition_informer(kind, set_, remove)
            for kind, set_, remove in (
                (GlobalMetric, self.metrics.set_metric, self.metrics.remove_metric),
                (Metric, self.metrics.set_metric, self.metrics.remove_metric),
                (GlobalMetricsProvider, self.metrics.set_provider, self.metrics.remove_provider),
                (MetricsProvider, self.metrics.set_provider, self.metrics.remove_provider),
            )
        ]
        self.informers[:0] = definitions
        self.provider_status = ProviderStatusWriter(self.client, self.metrics)
        self.fleet_pods: FleetPipeline | None = None
        watch_state(self)  # queue sizes, applications per cluster and state on /metrics
        if self.config.fleet.enabled:
            self.fleet_pods = FleetPipeline(client, self.config.fleet, self.cluster_informer)

    def _informer_of(self, kind: type[Kind]) -> Informer[Any]:
        return next(i for i in self.informers if i.kind is kind)

    def _definition_informer(
        self,
        kind: type[Kind],
        set_: Callable[[Any], None],
        remove: Callable[[str, str | None, str], None],
    ) -> Informer[Any]:
        """Feed metric and provider definitions to the metric cache."""

        def added(obj: Any) -> None:
            set_(obj)
            self._definitions_changed()

        def updated(old: Any, new: Any) -> None:
            if old.spec == new.spec:  # e.g. a provider's status written by us
                set_(new)
                return
            added(new)

        def deleted(obj: Any) -> None:
            remove(obj.kind, obj.metadata.namespace, obj.metadata.name)
            self._definitions_changed()

        return Informer(self.client, kind, on_add=added, on_update=updated, on_delete=deleted)

    # lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        await self._publish_config()
        # Metric definitions first, so clusters are scored with their values from the start.
        await self.start_informers(*self.informers[:4])
        await self.metrics.refresh_now()
        await self.start_informers(*(i for i in self.informers[4:] if i is not self.app_informer))
        await self.start_informers(self.app_informer)
        self.spawn(self.metrics.run())
        self.spawn(self._provider_status_loop())
        for _ in range(self.config.workers):
            self.spawn(self.work(self.queue, self._process, self._app_failed))
        for _ in range(2):
            self.spawn(self.work(self.cluster_queue, self._cluster_event, self._cluster_failed))
        if self.fleet_pods is not None:  # pods onto nodes through the agents (docs/fleet.md)
            self.spawn(self.fleet_pods.run())

    async def _publish_config(self) -> None:
        """Store the configuration this scheduler decides with: the API's dry run reads it,
        so that the two never decide differently. It is always published as
        ``PUBLISHED_AS``, whatever the lease's name, labelled with that name: the scheduler
        that started leading last is the one that runs."""
        if not self.publish:
            return
        labels = {LEASE_LABEL: self.lease_name}
        while True:
            try:
                try:
                    current = await self.client.get(SchedulerConfiguration, PUBLISHED_AS)
                except NotFound:
                    published = SchedulerConfiguration(
                        metadata=Metadata(name=PUBLISHED_AS, labels=labels), spec=self.config
                    )
                    await self.client.create(published)
                    return
                ours = current.metadata.labels.get(LEASE_LABEL) == self.lease_name
                if current.spec != self.config or not ours:
                    current.spec = self.config
                    current.metadata.labels = {**current.metadata.labels, **labels}
                    await self.client.update(current)  # CAS on the version just read
                return
            except Conflict:
                continue  # another replica wrote it meanwhile: read it again
            except (ApiError, Unreachable) as error:
                log.warning(
                    "cannot publish the configuration of the scheduler of lease %s (%s): "
                    "the API's dry run decides with the last one published, or the defaults",
                    self.lease_name,
                    error,
                )
                return

    async def stop(self) -> None:
        self.queue.close()
        self.cluster_queue.close()
        await super().stop()
        await self.apps_handler.binder.close()
        await self.apps_handler.events.close()
        await self.cloud_handler.events.close()
        await self.metrics.close()

    # application events ----------------------------------------------------------------

    def _check_eviction(self, where: tuple[str | None, str]) -> None:
        """Queue the eviction work of a cluster that is deleted, or gone with applications."""
        cluster = self.cluster_informer.get(where[1], where[0])
        if cluster is None:
            if where in self.placed.on_cluster:
                self.cluster_queue.add(("e:" + (where[0] or ""), where[1]))
        elif cluster.metadata.deleted is not None:
            self.cluster_queue.add(cluster_key("e:", cluster))

    def _app_added(self, app: Application) -> None:
        self.placed.update(app)
        if self.apps_handler.wants_pass(app):
            self.queue.add(key_of(app))

    def _app_updated(self, old: Application, new: Application) -> None:
        if settled(new) and not settled(old):
            self.apps_handler.settled_now(new)
        if ref_key(old.status.scheduled_to) != ref_key(new.status.scheduled_to) or (
            old.status.running_on != new.status.running_on
            or old.status.pending_cleanups != new.status.pending_cleanups
            or old.status.placements != new.status.placements
            or old.status.copies != new.status.copies
        ):
            self.placed.update(new)
        # A state change matters only to an application the scheduler was leaving alone
        # (FAILED, deleting...): between states it handles, nothing a decision reads
        # changed. The echoes of its own binding and of RUNNING queued each one twice more.
        relevant = (
            old.metadata.modified != new.metadata.modified
            or old.metadata.deleted != new.metadata.deleted
            or old.status.reschedule_requested != new.status.reschedule_requested
            or (
                old.status.state != new.status.state
                and new.status.reason is None
                and not self.apps_handler.wants_pass(old)
            )
        )
        if relevant and self.apps_handler.wants_pass(new):
            self.queue.add(key_of(new))

    def _app_deleted(self, app: Application) -> None:
        self.placed.update(app, add=False)
        self.apps_handler.forget(app)
        self.waiting.discard(key_of(app))

    def _app_failed(self, key: AppKey, error: Exception) -> None:
        if isinstance(error, Unreachable):  # the API restarts: one line, no stack
            log.warning("scheduling %s/%s: %s; retrying", *key, error)
        else:
            log.exception("scheduling %s/%s failed; retrying", *key)
        stats.ATTEMPTS.labels("error").inc()
        self.queue.add_after(key, self.config.backoff.initial)

    async def _process(self, key: AppKey) -> None:
        app = self.app_informer.get(key[1], key[0])
        if app is None or not self.apps_handler.wants_pass(app):
            self.waiting.discard(key)
            return
        self.passes += 1
        started = time.perf_counter()
        outcome: Outcome = await self.apps_handler.schedule(app)
        stats.attempt(outcome.kind, time.perf_counter() - started)
        if outcome.kind == "waiting" or outcome.kind == "failed" or outcome.short:
            self.waiting.add(key)  # a cluster event that could help wakes it
        else:
            self.waiting.discard(key)
        if outcome.kind == "failed":
            return
        delay = outcome.retry_in if outcome.retry_in is not None else self.config.reschedule_after
        self.queue.add_after(key, delay)

    # cluster events --------------------------------------------------------------

    def _cluster_changed(self, cluster: Cluster, old: Cluster | None = None) -> None:
        backend = self.clusters.set(cluster)
        self.cluster_queue.add(cluster_key("c:", cluster))
        if (
            old is not None
            and old.status.state == cluster.status.state
            and (
                old.metadata.labels == cluster.metadata.labels
                and old.spec == cluster.spec
                and old.status.custom_resources == cluster.status.custom_resources
                and old.metadata.deleted == cluster.metadata.deleted
            )
        ):
            return
        where = (cluster.metadata.namespace, cluster.metadata.name)
        self._check_eviction(where)
        # Every input of a decision is a trigger: its applications are evaluated again at
        # once (kept, with nothing written, if it still wins), found through the index.
        for key in self.placed.on_cluster.get(where, ()):
            self.queue.add(key)
        if backend is not None and backend.schedulable:
            self._wake_waiting(lambda app: backend_fits(request_for(app, self.config), backend))

    def _cluster_deleted(self, cluster: Cluster) -> None:
        self.clusters.remove(cluster)
        where = (cluster.metadata.namespace, cluster.metadata.name)
        for key in self.placed.on_cluster.get(where, ()):
            self.queue.add(key)
        self._check_eviction(where)

    def _wake_waiting(self, could_help: Callable[[Application], bool]) -> None:
        for key in list(self.waiting):
            app = self.app_informer.get(key[1], key[0])
            if app is None:
                self.waiting.discard(key)
            elif could_help(app):
                self.queue.add(key)

    # metrics -----------------------------------------------------------------------

    def _definitions_changed(self, *_: Any) -> None:
        self.clusters.refresh_metrics()
        self.clouds.refresh_metrics()

    def _metrics_changed(self, changed: Any) -> None:
        """Metric values moved: re-score in memory, requeue only apps whose winner changed."""
        self.clusters.refresh_metrics()
        self.clouds.refresh_metrics()
        for cluster in self.cluster_informer.items():
            self.cluster_queue.add(cluster_key("c:", cluster))
        for cloud in self.clouds.backends():
            self.cluster_queue.add(cloud_key(cloud.obj))
        for app in self.app_informer.items():
            if not self.apps_handler.wants_pass(app):
                continue
            key = key_of(app)
            if key in self.waiting:
                self.queue.add(key)
                continue
            current = app.status.scheduled_to
            if current is None or not app.spec.constraints.migration:
                continue
            decision = self.apps_handler.decide(app)
            if decision.chosen is not None and decision.chosen.name != current.name:
                self.queue.add(key)
        self._wake_waiting(lambda app: True)

    # cluster status (FAILING_METRICS) and cluster → cloud ------------------------------

    async def _cluster_event(self, key: AppKey) -> None:
        if key[0].startswith("e:"):
            namespace = key[0][2:] or None
            cluster = self.cluster_informer.get(key[1], namespace)
            if not await self.eviction.sync((namespace, key[1]), cluster):
                self.cluster_queue.add_after(key, 0.05)  # applications still leaving
            elif cluster is None:
                self.placed.on_cluster.pop((namespace, key[1]), None)
        elif key[0].startswith("c:"):
            await self._sync_cluster_metrics(key[0][2:] or None, key[1])
        elif key[0][:2] in ("o:", "g:"):
            await self._sync_cloud_metrics(key[0][:2], key[0][2:] or None, key[1])
        else:
            await self._schedule_cluster(key)

    def _cluster_failed(self, key: AppKey, error: Exception) -> None:
        if isinstance(error, Conflict | NotFound):
            # Our copy was stale (the observer wrote meanwhile): its watch event brings
            # the fresh object; try again shortly from that.
            self.cluster_queue.add_after(key, 0.05)
        elif isinstance(error, Unreachable):
            log.warning("cluster %s/%s: %s; retrying", *key, error)
            self.cluster_queue.add_after(key, self.config.backoff.initial)
        else:
            log.exception("cluster %s/%s failed; retrying", *key)
            self.cluster_queue.add_after(key, self.config.backoff.initial)

    def _ranked_failing(self, backend: Backend) -> None:
        """A decision looked at a cluster with failing metrics: it becomes FAILING_METRICS."""
        where, uid = (backend.namespace, backend.name), backend.obj.metadata.uid
        if self.ranked_failing.get(where, "") != uid:
            self.ranked_failing[where] = uid
            self.cluster_queue.add(("c:" + (backend.namespace or ""), backend.name))

    async def _sync_cluster_metrics(self, namespace: str | None, name: str) -> None:
        """ONLINE → FAILING_METRICS once a ranking found a metric failing, as Krake's;
        FAILING_METRICS → ONLINE when every metric has a value again; metrics_reasons
        name each failing metric meanwhile. A cluster no application was ranked on
        stays ONLINE, whatever its metrics."""
        cluster = self.cluster_informer.get(name, namespace)
        backend = self.clusters.get(namespace, "Cluster", name)
        where = (namespace, name)
        if cluster is None or backend is None or cluster.metadata.deleted is not None:
            self.ranked_failing.pop(where, None)
            return
        if self.ranked_failing.get(where, cluster.metadata.uid) != cluster.metadata.uid:
            del self.ranked_failing[where]  # ranked under a deleted cluster of that name
        if cluster.spec.to_build and cluster.status.scheduled_to is None:
            self.cluster_queue.add(("k:" + (namespace or ""), name))
        state = cluster.status.state
        reasons: dict[str, Reason] = dict(backend.failing)
        if state is ClusterState.FAILING_METRICS and not backend.metrics_failing:
            cluster.status.state = ClusterState.ONLINE
            self.ranked_failing.pop(where, None)
            reasons = {}
        elif state is ClusterState.ONLINE and backend.metrics_failing:
            if where not in self.ranked_failing:
                reasons = {}  # no ranking found it yet: ONLINE, as Krake leaves it
            else:
                cluster.status.state = ClusterState.FAILING_METRICS
        elif state is not ClusterState.FAILING_METRICS:
            reasons = {}
        if cluster.status.state is state and cluster.status.metrics_reasons == reasons:
            return
        cluster.status.metrics_reasons = reasons
        await self.client.update_status(cluster)

    async def _schedule_cluster(self, key: AppKey) -> None:
        namespace = key[0][2:] or None
        cluster = self.cluster_informer.get(key[1], namespace)
        if cluster is None:
            return
        retry = await self.cloud_handler.schedule(cluster)
        if retry is not None:
            self.cluster_queue.add_after(key, retry)

    async def _sync_cloud_metrics(self, tag: str, namespace: str | None, name: str) -> None:
        """A (Global)Cloud's ONLINE ⇄ FAILING_METRICS, as for clusters."""
        kind: type[Kind] = Cloud if tag == "o:" else GlobalCloud
        cloud: Any = self._informer_of(kind).get(name, namespace)
        backend = self.clouds.get(namespace, kind.__name__, name)
        if cloud is None or backend is None or cloud.metadata.deleted is not None:
            return
        reasons: dict[str, Reason] = dict(backend.failing)
        state = "FAILING_METRICS" if reasons else "ONLINE"
        if cloud.status.state == state and cloud.status.metrics_reasons == reasons:
            return
        update = cloud.model_copy(deep=True)
        update.status.state = state
        update.status.metrics_reasons = reasons
        await self.client.update_status(update)

    # metrics provider status -------------------------------------------------------

    async def sync_provider_status(self) -> int:
        """Write each provider's health to its status when it changed meaningfully."""
        providers = [
            obj
            for kind in (GlobalMetricsProvider, MetricsProvider)
            for obj in self._informer_of(kind).items()
        ]
        return await self.provider_status.sync(providers, self.apps_handler.events)

    async def _provider_status_loop(self) -> None:
        while True:
            await asyncio.sleep(min(self.config.metrics_refresh, 5.0))
            try:
                await self.sync_provider_status()
            except asyncio.CancelledError:
                raise
            except Exception:  # the task's top level: log, try again next round
                log.exception("writing metrics provider status failed")

    def _cloud_changed(self, cloud: Kind, old: Kind | None = None) -> None:
        self.clouds.set(cloud)
        self.cluster_queue.add(cloud_key(cloud))
        for cluster in self.cluster_informer.items():
            if cluster.spec.to_build and cluster.status.scheduled_to is None:
                self.cluster_queue.add(
                    ("k:" + (cluster.metadata.namespace or ""), cluster.metadata.name)
                )

    def _cloud_deleted(self, cloud: Kind) -> None:
        self.clouds.remove(cloud)
