"""The Kubernetes application controller: deploys applications where the scheduler bound them.

Acts on an application only when ``status.scheduled_to`` is set and
``kube_controller_triggered >= metadata.modified`` (the scheduler's handshake: the
scheduler saw the latest spec first). The controller keeps the loop, the work
queue, the informers and the member clusters' watches; the planner
(``kube.planner``) gives each cluster the application is placed on its copy, and
that cluster's ``Applier`` (``shoal.copies.applier``) runs it with server-side
apply, each object labelled with its application and refused when another
application owns it. The applied kinds are watched on the clusters
(``shoal.copies.watch``), whose copies tell readiness and drift and wake the
application at once; polling is the slow fallback. ``kube.deploy`` brings the
copies up (new ones first, the old removed once they run), ``kube.removal``
removes them (after a migration, on deletion, what was left), ``kube.writes``
writes the controller's own status fields, as field-level patches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import KW_ONLY, InitVar, dataclass
from functools import partial
from typing import Any

import aiohttp

from shoal.client.batcher import Batcher
from shoal.client.informer import CacheKey, Informer, cache_key
from shoal.client.kube import KubeApiError, KubeClients, KubeCluster, KubeUnreachable
from shoal.client.rest import Conflict, NotFound, ShoalClient, Unreachable
from shoal.controllers.base import Controller
from shoal.copies.applier import Applier
from shoal.copies.member import KubeFailure, Members
from shoal.copies.objects import (
    Obj,
    clusters_of,
    placement,
    ref_key,
    tells_anything,
    triggered,
    unexplained,
    unread,
    watch_entries,
)
from shoal.copies.owners import Owner
from shoal.copies.watch import ClusterWatches
from shoal.events import Recorder
from shoal.kube import deploy, planner, removal, writes
from shoal.kube.hooks import HookSettings, settings_from_environment
from shoal.kube.hub import Runner
from shoal.kube.pulled import PulledCopies
from shoal.kube.stats import timed_apply
from shoal.machinery.workqueue import WorkQueue
from shoal.model.base import ReasonCode, ResourceRef
from shoal.model.copies import Copy, CopySpec
from shoal.model.kubernetes import (
    Application,
    ApplicationState,
    Cluster,
    ClusterState,
)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class KubeController(Controller):
    client: ShoalClient
    _: KW_ONLY
    # Reconciles in flight. Each mostly waits: on the API for the finalizer and status
    # writes, on the member cluster for the apply. Under a burst those round trips take
    # 40-60 ms each, so 64 workers capped the controller near 400 applications per second
    # while its core was not busy, and the wait grew in its queue (docs/performance-rounds.md,
    # seventh round). Writes go in batches and each cluster's client keeps at most 100
    # connections, so more workers mean larger batches, not more requests.
    workers: int = 256
    poll_interval: float = 0.5
    resync: float = 30.0
    timeout: InitVar[float] = 5.0
    watch: InitVar[bool] = True
    fallback: float = 5.0
    cleanup_retry: float = 10.0
    progress_delay: float = 1.0
    prune_interval: float = 60.0  # seconds between two prunes of every ONLINE cluster

    hook_settings: HookSettings | None = None  # None: from the environment (kube.hooks)

    def __post_init__(self, timeout: float, watch: bool) -> None:
        if self.hook_settings is None:
            self.hook_settings = settings_from_environment(self.client.url)
        # one client (and pool of 100 connections) per cluster; the watches take one each
        # per kind and namespace applied there, so they cannot starve the other requests
        self.kube = KubeClients(timeout=timeout)
        self.queue: WorkQueue[CacheKey] = WorkQueue()
        self.watches: ClusterWatches | None = (
            ClusterWatches(self._watch_client, self.queue.add, wakes=tells_anything)
            if watch
            else None
        )
        self.members = Members(self.watches, self._exists)
        # each member cluster's applier: what it applied and observed of each copy there
        self.appliers: dict[CacheKey, Applier] = {}
        self._repairs_before = 0  # drift repairs of the appliers of deleted clusters
        # copies left behind by deleted applications on unreachable clusters
        self.orphans: dict[CacheKey, list[tuple[str, Obj, Owner]]] = {}
        self.cleanup_tried: dict[tuple[CacheKey, CacheKey], float] = {}
        self.orphan_tasks: dict[CacheKey, asyncio.Task[None]] = {}
        self.failures: dict[CacheKey, int] = {}
        self.events = Recorder(self.client, "kube-controller")
        self._http: aiohttp.ClientSession | None = None  # to ask workloads to shut down
        # status writes of concurrent reconciles share requests and store commits
        self.status_writes = Batcher(self.client.patch_status_many)
        self.finalizer_writes = Batcher(self.client.set_finalizers_many)
        self.copy_creates = Batcher(partial(self.client.create_items, Copy))  # pull clusters'
        self.applied_at: dict[CacheKey, float] = {}  # loop time of the last apply
        self.written: dict[CacheKey, int] = {}  # resource_version of our last write
        # writes not yet answered: the revisions of the events that came meanwhile
        self.early: dict[CacheKey, list[int]] = {}
        self.behind: set[CacheKey] = set()  # reconciles that waited for our last write's event
        self.app_informer: Informer[Application] = Informer(
            self.client,
            Application,
            on_change=self._app_event,
            on_delete=self._app_deleted,
            quiet=self._quiet,
            keep=unexplained,
        )
        self.cluster_informer: Informer[Cluster] = Informer(
            self.client, Cluster, on_change=self._cluster_event, on_delete=self._cluster_deleted
        )
        # pull clusters' copies, run by their agents (``kube.pulled``); none for push ones
        self.copy_informer: Informer[Copy] = Informer(
            self.client, Copy, on_change=self._copy_event, on_delete=self._copy_event
        )
        self.pulled: dict[CacheKey, PulledCopies] = {}
        super().__init__()

    # lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        await self.start_informers(self.cluster_informer)
        await self.start_informers(self.copy_informer)
        await self.start_informers(self.app_informer)
        self.spawn_workers(self.workers, self.queue, self.reconcile, self._retry)
        self.spawn(self._prune_every())

    async def _prune_every(self) -> None:
        """Prune every ONLINE cluster every ``prune_interval`` seconds, not only when one is
        seen coming back: a return while the API could not be watched (its informer listed
        again afterwards and saw no change of state) is otherwise never seen."""
        while True:
            await asyncio.sleep(self.prune_interval)
            for cluster in self.cluster_informer.items():
                ready = cluster.spec.kubeconfig is not None and cluster.metadata.deleted is None
                if cluster.spec.mode == "pull" and cluster.status.state is ClusterState.ONLINE:
                    self.spawn(removal.prune_copies(self, cluster))
                elif ready and cluster.status.state is ClusterState.ONLINE:
                    try:
                        await self._connect(cluster)
                    except Exception:  # a background loop's top level: the next round
                        log.exception("pruning cluster %s failed", cluster.metadata.name)

    async def stop(self) -> None:
        await super().stop()
        removal.stop_orphans(self)
        if self.watches is not None:
            await self.watches.stop()
        await self.kube.close()
        await self.events.close()
        await self.status_writes.close()
        await self.finalizer_writes.close()
        await self.copy_creates.close()
        if self._http is not None:
            await self._http.close()

    # events --------------------------------------------------------------------------

    def _app_event(self, app: Application, old: Application | None = None) -> None:
        key = cache_key(app)
        if old is not None and old.status.retries and not app.status.retries:
            self.failures.pop(key, None)  # retried by a user: the waits start afresh
        echo = old is not None and app.metadata.resource_version == self.written.get(key)
        if not echo and old is not None and key in self.early and key not in self.behind:
            # perhaps the echo of the write in flight, come before its answer: decided then
            self.early[key].append(app.metadata.resource_version or 0)
        elif not echo or key in self.behind:
            # the echo of our own last write tells nothing new, unless a reconcile waited for it
            self.behind.discard(key)
            self.queue.add(key)
        if self.watches is not None and (old is None or placement(old) != placement(app)):
            self.watches.set_app(cache_key(app), watch_entries(app))

    def _quiet(self, raw: dict[str, Any]) -> bool:
        """No handler needs this application event: its model waits until read."""
        key = (raw["metadata"].get("namespace"), raw["metadata"]["name"])
        entries = self.watches.entries(key) if self.watches is not None else None
        return key not in self.behind and unread(raw, self.written.get(key), entries)

    async def _watch_client(self, key: CacheKey) -> KubeCluster | None:
        cluster = self.cluster_informer.get(key[1], key[0])
        if cluster is None or cluster.spec.kubeconfig is None:
            return None
        try:
            return await self.kube.get(cluster)
        except KubeApiError:
            return None

    def _app_deleted(self, app: Application) -> None:
        key = cache_key(app)
        self.failures.pop(key, None)
        self.applied_at.pop(key, None)
        self.written.pop(key, None)
        self.behind.discard(key)
        for applier in self.appliers.values():
            applier.forget(app.metadata.uid or "")
        if self.watches is not None:
            self.watches.set_app(key, ())

    def _cluster_event(self, cluster: Cluster, old: Cluster | None = None) -> None:
        if old is not None and old.spec.mode == "pull" and cluster.spec.mode != "pull":
            pulled = self.pulled.pop(cache_key(cluster), None)
            if pulled is not None:  # moved to push: the hub's applier takes its copies over
                self.spawn(pulled.drop())
        new_config = old is None or old.spec.kubeconfig != cluster.spec.kubeconfig
        if new_config and self.watches is not None:
            self.watches.restart(cache_key(cluster))  # a new cluster, or reached anew
        # Answering again (it may have been deleted and registered again meanwhile): what
        # Shoal left there while it did not answer is pruned now.
        back = old is not None and old.status.state != cluster.status.state == ClusterState.ONLINE
        ready = cluster.spec.kubeconfig is not None and cluster.metadata.deleted is None
        if (new_config or back) and ready:
            self.spawn(self._connect(cluster))
        if back and cluster.spec.mode == "pull":
            self.spawn(removal.prune_copies(self, cluster))
        # Applications waiting on this cluster (e.g. it came back) get another look,
        # and so do copies left behind there; not on every status write (metrics, nodes).
        if old is not None and (
            old.spec.kubeconfig,
            old.status.state,
            old.metadata.deleted,
        ) == (cluster.spec.kubeconfig, cluster.status.state, cluster.metadata.deleted):
            return
        key = cache_key(cluster)
        for app in self.app_informer.items():
            if any(ref_key(ref) == key for ref in clusters_of(app)):
                self.queue.add(cache_key(app))
        removal.retry_left_on(self, cluster)

    async def _connect(self, cluster: Cluster) -> None:
        """Build a cluster's client when it is registered, not on its first application,
        and prune what Shoal left there (``_prune``).

        The Kubernetes client loads the system's CA certificates for each cluster
        (tens of milliseconds of CPU): paid once, ahead of the first deployment.
        """
        with contextlib.suppress(KubeApiError, KubeUnreachable):
            await removal.prune(self, await self.applier_of(cluster))

    def _copy_event(self, copy: Copy, old: Copy | None = None) -> None:
        """A pull cluster's agent answered (or removed) a copy: its application looks again."""
        meta = copy.metadata
        if old is None or old.status != copy.status or old.metadata.deleted != meta.deleted:
            self.queue.add((copy.metadata.namespace, copy.spec.app_name))

    async def _cluster_deleted(self, cluster: Cluster) -> None:
        pulled = self.pulled.pop(cache_key(cluster), None)
        if pulled is not None:  # its agent is gone for good: its copies go without it
            await pulled.drop()
        await self.kube.forget(*cache_key(cluster))
        gone = self.appliers.pop(cache_key(cluster), None)
        self._repairs_before += gone.drift_repairs if gone is not None else 0
        if self.watches is not None:
            self.watches.restart(cache_key(cluster))  # their connection was just closed
        self._cluster_event(cluster)

    def _retry(self, key: CacheKey, error: Exception) -> None:
        if isinstance(error, Conflict | NotFound):
            self.queue.add_after(key, 0.05)  # re-read from the informer
        elif isinstance(error, Unreachable):
            log.warning("application %s/%s: API unreachable: %s", *key, error)
            self.queue.add_after(key, 1.0)
        else:
            log.exception("application %s/%s failed; retrying", *key)
            self.queue.add_after(key, 1.0)

    # reconciliation --------------------------------------------------------------------

    def _acts_on(self, app: Application) -> bool:
        return app.status.scheduled_to is not None and triggered(app)

    async def reconcile(self, key: CacheKey) -> None:
        app = self.app_informer.get(key[1], key[0])
        if app is None:
            return
        if (app.metadata.resource_version or 0) < self.written.get(key, 0):
            self.behind.add(key)  # not yet seen our last write: its event re-queues it
            return
        try:
            if app.metadata.deleted is not None:
                await removal.delete(self, app)
            elif app.status.deploy_state is not ApplicationState.FAILED:  # until retried
                if app.status.pending_cleanups:
                    app = await removal.cleanup(self, app)
                if self._acts_on(app) and not app.spec.manifest:
                    await deploy.nothing_to_deploy(self, app)
                    return
                if self._acts_on(app):
                    app = await deploy.with_tokens(self, app)
                if self._acts_on(app):
                    await deploy.deploy(self, app)
                elif deploy.withdrawn(self, app):
                    await deploy.withdraw(self, app)
        except KubeFailure as failure:
            await writes.failed(self, app, failure)

    def desired(self, app: Application) -> list[Obj]:
        """The objects to apply: the manifest, with Krake's hooks put in (``kube.hooks``)."""
        assert self.hook_settings is not None  # set in __post_init__
        return planner.desired(app, self.hook_settings)

    def plan(self, app: Application) -> list[CopySpec]:
        """The copy each cluster the application is placed on runs (``kube.planner``)."""
        assert self.hook_settings is not None  # set in __post_init__
        return planner.copies(app, self.hook_settings, self.cluster)

    async def applier(self, ref: ResourceRef, code: ReasonCode) -> Runner:
        """What runs the copies of cluster ``ref``: its applier, or for a pull cluster its
        ``Copy`` objects; ``KubeFailure`` when it cannot be reached."""
        cluster = self.cluster(ref)
        if cluster is not None and cluster.spec.mode == "pull":
            return self.pulled_of(cluster)
        if cluster is None or cluster.spec.kubeconfig is None:
            raise KubeFailure(
                ReasonCode.CLUSTER_NOT_REACHABLE,
                f"cluster {ref.name} is unknown or has no kubeconfig",
            )
        try:
            return await self.applier_of(cluster)
        except KubeApiError as error:
            raise KubeFailure(code, f"cluster {ref.name}: {error}") from error

    async def runner_of(self, cluster: Cluster) -> Runner:
        """``applier``'s answer for a known cluster (``KubeApiError``: no client)."""
        if cluster.spec.mode == "pull":
            return self.pulled_of(cluster)
        return await self.applier_of(cluster)

    def pulled_of(self, cluster: Cluster) -> PulledCopies:
        key = cache_key(cluster)
        pulled = self.pulled.get(key)
        if pulled is None:
            ref = ResourceRef(api="kubernetes", kind="Cluster", namespace=key[0], name=key[1])
            pulled = self.pulled[key] = PulledCopies(self.client, ref, self.copy_informer,
                                                     self.copy_creates)  # fmt: skip
        return pulled

    async def applier_of(self, cluster: Cluster) -> Applier:
        """The applier of ``cluster``, on its current client (``KubeApiError``: none)."""
        kube = await self.kube.get(cluster)
        key = cache_key(cluster)
        applier = self.appliers.get(key)
        if applier is None:
            ref = ResourceRef(api="kubernetes", kind="Cluster", namespace=key[0], name=key[1])
            applier = self.appliers[key] = Applier(kube, ref, self.members, timed_apply)
        applier.kube = kube
        return applier

    def cluster(self, ref: ResourceRef | None) -> Cluster | None:
        if ref is None:
            return None
        return self.cluster_informer.get(ref.name, ref.namespace)

    def _exists(self, owner: Owner) -> bool:
        """The application ``owner`` names is still there (being deleted counts)."""
        app = self.app_informer.get(owner.name, owner.namespace)
        return app is not None and app.metadata.uid == owner.uid

    @property
    def drift_repairs(self) -> int:
        """Copies applied again because someone else changed them, on every cluster."""
        return self._repairs_before + sum(a.drift_repairs for a in self.appliers.values())

    def http(self) -> aiohttp.ClientSession:
        """The session that asks workloads to shut down (Krake's shutdown hook)."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
        return self._http

    async def write(self, app: Application, fields: dict[str, Any]) -> Application:
        """Patch those of the controller's own status fields that differ (``kube.writes``)."""
        return await writes.write(self, app, fields)

    async def set_finalizers(self, app: Application, finalizers: list[str]) -> Application:
        """Write the finalizers alone, on our copy's revision (``kube.writes``)."""
        return await writes.set_finalizers(self, app, finalizers)
