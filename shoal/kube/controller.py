"""The Kubernetes application controller: deploys applications where the scheduler bound them.

Acts on an application only when ``status.scheduled_to`` is set and
``kube_controller_triggered >= metadata.modified`` (the scheduler's handshake: the
scheduler saw the latest spec first). Manifests are applied with server-side
apply, each object labelled with its application and refused when another
application owns it (``shoal.copies.member``, ``shoal.copies.owners``); the applied
kinds are watched on the clusters (``shoal.copies.watch``), whose copies tell
readiness and drift (an object deleted or changed by someone else, applied
again) and wake the application at once; polling is the slow fallback. Only
the controller's own status fields are written, as field-level patches.
A migration applies on the new cluster, waits until ready there, and only then
deletes the old copy (or remembers it in ``status.pending_cleanups`` when the
old cluster does not answer). Deletion removes
the manifest objects, then the finalizer ``shoal.kube/resources``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable
from dataclasses import KW_ONLY, InitVar, dataclass
from datetime import timedelta
from typing import Any

import aiohttp

from shoal.client.batcher import Batcher
from shoal.client.informer import CacheKey, Informer, cache_key
from shoal.client.kube import KubeApiError, KubeClients, KubeCluster, KubeUnreachable
from shoal.client.rest import ApiError, Conflict, NotFound, ShoalClient, Unreachable
from shoal.controllers.base import Controller
from shoal.controllers.prometheus import timed_apply
from shoal.controllers.queue import WorkQueue
from shoal.copies.applier import Applier, NoAddress
from shoal.copies.member import KubeFailure, Members, obj_key, unreachable
from shoal.copies.namespaces import kube_namespace
from shoal.copies.objects import (
    Obj,
    cleanup_ref,
    clusters_of,
    ident,
    outside,
    placement,
    ref_key,
    stub,
    tells_anything,
    triggered,
    unread,
    watch_entries,
)
from shoal.copies.owners import Owner
from shoal.copies.watch import ClusterWatches
from shoal.events import Recorder, reasons
from shoal.kube import deploy, planner
from shoal.kube.hooks import HOOKS, HookSettings, settings_from_environment
from shoal.model.application_status import placed_on, runs_on
from shoal.model.base import Reason, ReasonCode, ResourceRef, utcnow
from shoal.model.copies import CopySpec
from shoal.model.kubernetes import (
    KUBE_FINALIZER,
    Application,
    ApplicationState,
    Cluster,
    ClusterState,
)

log = logging.getLogger(__name__)


MAX_BACKOFF = 60.0
PRUNED_KINDS = (
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
)
"""Kinds a connecting cluster is searched for objects left behind, beside every kind that
an application's manifest names."""


def _unexplained(raw: dict[str, Any]) -> dict[str, Any]:
    """An application event's object without the scheduler's explanation, which the kube
    controller never reads nor writes back (its status writes are patches of its own
    fields): most of the object, built and kept for nothing."""
    status = raw.get("status")
    if status and status.get("scheduling") is not None:
        status["scheduling"] = None
    return raw


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
        self.watches: ClusterWatches | None = (
            ClusterWatches(self._watch_client, self.queue_add, wakes=tells_anything)
            if watch
            else None
        )
        self.members = Members(self.watches, self._exists)
        # each member cluster's applier: what it applied and observed of each copy there
        self.appliers: dict[CacheKey, Applier] = {}
        self.drift_repairs = 0
        # copies left behind by deleted applications on unreachable clusters
        self.orphans: dict[CacheKey, list[tuple[str, Obj, Owner]]] = {}
        self._cleanup_tried: dict[tuple[CacheKey, CacheKey], float] = {}
        self._orphan_tasks: dict[CacheKey, asyncio.Task[None]] = {}
        self.queue: WorkQueue[CacheKey] = WorkQueue()
        self.failures: dict[CacheKey, int] = {}
        self.events = Recorder(self.client, "kube-controller")
        self._http: aiohttp.ClientSession | None = None  # to ask workloads to shut down
        # status writes of concurrent reconciles share requests and store commits
        self.status_writes = Batcher(self.client.patch_status_many)
        self.finalizer_writes = Batcher(self.client.set_finalizers_many)
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
            keep=_unexplained,
        )
        self.cluster_informer: Informer[Cluster] = Informer(
            self.client, Cluster, on_change=self._cluster_event, on_delete=self._cluster_deleted
        )
        super().__init__()

    # lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        await self.start_informers(self.cluster_informer)
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
                if ready and cluster.status.state is ClusterState.ONLINE:
                    try:
                        await self._connect(cluster)
                    except Exception:  # a background loop's top level: the next round
                        log.exception("pruning cluster %s failed", cluster.metadata.name)

    async def stop(self) -> None:
        await super().stop()
        for orphan_task in list(self._orphan_tasks.values()):
            orphan_task.cancel()
        self._orphan_tasks.clear()
        if self.watches is not None:
            await self.watches.stop()
        await self.kube.close()
        await self.events.close()
        await self.status_writes.close()
        await self.finalizer_writes.close()
        if self._http is not None:
            await self._http.close()

    # events --------------------------------------------------------------------------

    def queue_add(self, key: CacheKey) -> None:
        self.queue.add(key)

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
        new_config = old is None or old.spec.kubeconfig != cluster.spec.kubeconfig
        if new_config and self.watches is not None:
            self.watches.restart(cache_key(cluster))  # a new cluster, or reached anew
        # Answering again (it may have been deleted and registered again meanwhile): what
        # Shoal left there while it did not answer is pruned now.
        back = old is not None and old.status.state != cluster.status.state == ClusterState.ONLINE
        ready = cluster.spec.kubeconfig is not None and cluster.metadata.deleted is None
        if (new_config or back) and ready:
            self.spawn(self._connect(cluster))
        # Applications waiting on this cluster (e.g. it came back) get another look,
        # and so do copies left behind there; not on every status write (metrics, nodes).
        if old is not None and (
            old.spec.kubeconfig,
            old.status.state,
            old.metadata.deleted,
        ) == (cluster.spec.kubeconfig, cluster.status.state, cluster.metadata.deleted):
            return
        key = cache_key(cluster)
        for tried in [t for t in self._cleanup_tried if t[1] == key]:
            del self._cleanup_tried[tried]
        for app in self.app_informer.items():
            if any(ref_key(ref) == key for ref in clusters_of(app)):
                self.queue.add(cache_key(app))
        if key in self.orphans and key not in self._orphan_tasks:
            self._orphan_tasks[key] = asyncio.create_task(self._remove_orphans(cluster))

    async def _connect(self, cluster: Cluster) -> None:
        """Build a cluster's client when it is registered, not on its first application,
        and prune what Shoal left there (``_prune``).

        The Kubernetes client loads the system's CA certificates for each cluster
        (tens of milliseconds of CPU): paid once, ahead of the first deployment.
        """
        with contextlib.suppress(KubeApiError, KubeUnreachable):
            await self._prune(await self._applier_of(cluster))

    async def _prune(self, applier: Applier) -> None:
        """Remove what Shoal left on a cluster it connects to and no longer uses there.

        A cluster that was deleted while it did not answer, or while an application on it
        was being deleted, and is registered again (same name, same server) may hold
        copies nothing else will remove: every object labelled as an application's whose
        application is gone, or does not use this cluster (``scheduled_to``,
        ``running_on``, a pending clean-up), is deleted (``Applier.prune``). Kinds
        looked at: those of every application's manifest, and the common workload kinds.
        """
        await self.app_informer.wait_synced()
        where = applier.key
        kinds: set[tuple[str, str]] = set(PRUNED_KINDS)
        for app in self.app_informer.items():
            for obj in app.spec.manifest:
                api_version, kind = obj.get("apiVersion"), obj.get("kind")
                if isinstance(api_version, str) and isinstance(kind, str):
                    kinds.add((api_version, kind))

        uses: dict[str, set[CacheKey]] = {}

        def keep(owner: Owner) -> bool:
            # Read after the lists: an object listed was applied by this controller, which
            # had seen its application's binding, so the informer has it now.
            if not uses:
                uses.update({app.metadata.uid or "": {ref_key(r) for r in clusters_of(app)}
                             for app in self.app_informer.items()})  # fmt: skip
            return where in uses.get(owner.uid, set())

        pruned = await applier.prune(kinds, keep)
        if pruned:
            log.info("cluster %s: %d objects of applications that do not use it removed",
                     where[1], pruned)

    async def _cluster_deleted(self, cluster: Cluster) -> None:
        await self.kube.forget(*cache_key(cluster))
        self.appliers.pop(cache_key(cluster), None)
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
                await self._delete(app)
            elif app.status.deploy_state is not ApplicationState.FAILED:  # until retried
                if app.status.pending_cleanups:
                    app = await self._cleanup(app)
                if self._acts_on(app) and not app.spec.manifest:
                    await self._nothing_to_deploy(app)
                    return
                if self._acts_on(app):
                    app = await self._tokens(app)
                if self._acts_on(app):
                    await deploy.deploy(self, app)
                elif deploy.withdrawn(self, app):
                    await deploy.withdraw(self, app)
        except KubeFailure as failure:
            await self._failed(app, failure)

    async def _nothing_to_deploy(self, app: Application) -> None:
        """An application whose manifest is empty (stored before the API turned templates
        into manifests) waits with a reason, never RUNNING with nothing running; an update
        that gives it objects deploys it."""
        message = ("nothing to deploy: spec.manifest is empty (an application given as a "
                   "TOSCA template or CSAR gets its manifest when it is written: update it)")
        reason = Reason(code=ReasonCode.INVALID_TOSCA_MANIFEST, message=message)
        status = app.status
        if status.deploy_state is None and status.deploy_reason == reason:
            return
        await self.write(app, {"deploy_state": None, "deploy_reason": reason})

    def desired(self, app: Application) -> list[Obj]:
        """The objects to apply: the manifest, with Krake's hooks put in (``kube.hooks``)."""
        assert self.hook_settings is not None  # set in __post_init__
        return planner.desired(app, self.hook_settings)

    def plan(self, app: Application) -> list[CopySpec]:
        """The copy each cluster the application is placed on runs (``kube.planner``)."""
        assert self.hook_settings is not None  # set in __post_init__
        return planner.copies(app, self.hook_settings, self.cluster)

    async def applier(self, ref: ResourceRef, code: ReasonCode) -> Applier:
        """The applier of cluster ``ref``; ``KubeFailure`` when it cannot be reached."""
        cluster = self.cluster(ref)
        if cluster is None or cluster.spec.kubeconfig is None:
            raise KubeFailure(
                ReasonCode.CLUSTER_NOT_REACHABLE,
                f"cluster {ref.name} is unknown or has no kubeconfig",
            )
        try:
            return await self._applier_of(cluster)
        except KubeApiError as error:
            raise KubeFailure(code, f"cluster {ref.name}: {error}") from error

    async def _applier_of(self, cluster: Cluster) -> Applier:
        """The applier of ``cluster``, on its current client (``KubeApiError``: none)."""
        kube = await self.kube.get(cluster)
        key = cache_key(cluster)
        applier = self.appliers.get(key)
        if applier is None:
            ref = ResourceRef(api="kubernetes", kind="Cluster", namespace=key[0], name=key[1])
            applier = self.appliers[key] = Applier(kube, ref, self.members, timed_apply)
        applier.kube = kube
        return applier

    async def _tokens(self, app: Application) -> Application:
        """Each hook's token, made once and stored before the first apply that uses it."""
        status = app.status
        missing = {f"{hook}_token": secrets.token_urlsafe(32) for hook in HOOKS
                   if hook in app.spec.hooks and getattr(status, f"{hook}_token") is None}
        return await self.write(app, missing) if missing else app

    def _elsewhere(self, app: Application, ref: ResourceRef | None) -> bool:
        """``ref`` names a cluster outside the application's namespace: nothing is done there,
        and a warning event says so (without naming it: it is another tenant's)."""
        if not outside(app, ref):
            return False
        assert ref is not None
        log.warning("application %s/%s: its status names cluster %s/%s, outside its "
                    "namespace: not acted on", app.metadata.namespace, app.metadata.name,
                    ref.namespace, ref.name)  # fmt: skip
        message = (f"A cluster its status names is outside namespace {app.metadata.namespace}: "
                   "nothing was done there")  # fmt: skip
        self.events.emit(app, "OutsideNamespace", message, type="Warning")
        return True

    def cluster(self, ref: ResourceRef | None) -> Cluster | None:
        if ref is None:
            return None
        return self.cluster_informer.get(ref.name, ref.namespace)

    def _namespace_on(self, app: Application, ref: ResourceRef) -> str:
        """Where ``app``'s objects without a namespace are on ``ref`` (``kube.namespaces``)."""
        return kube_namespace(app, ref, self.cluster(ref))

    def _exists(self, owner: Owner) -> bool:
        """The application ``owner`` names is still there (being deleted counts)."""
        app = self.app_informer.get(owner.name, owner.namespace)
        return app is not None and app.metadata.uid == owner.uid

    async def shut_down_first(self, app: Application, refs: list[ResourceRef]) -> bool:
        """Krake's ``shutdown`` hook: whether the copies on ``refs`` may be removed now.

        The first time, the workload on each is asked to shut down (``PUT
        http://<node>:<nodePort>/shutdown`` of its Service, as Krake calls it) and the
        application waits in WAITING_FOR_CLEANING. It may be removed once the workload
        confirmed through the API's ``shutdown`` endpoint (READY_FOR_ACTION), or once
        ``spec.shutdown_grace_time`` has passed, with a warning event.
        """
        status = app.status
        if "shutdown" not in app.spec.hooks or status.shutdown_token is None or not refs:
            return True
        if status.deploy_state is ApplicationState.READY_FOR_ACTION:
            return True
        key = cache_key(app)
        grace = app.spec.shutdown_grace_time
        deadline = status.shutdown_grace_period
        now = utcnow()
        if deadline is None:
            # waiting first: a workload that confirms at once finds it waiting
            deadline = now + timedelta(seconds=grace)
            await self.write(app, {"deploy_state": ApplicationState.WAITING_FOR_CLEANING,
                                    "deploy_reason": None, "shutdown_grace_period": deadline})
            for ref in refs:
                await self._ask_to_shut_down(app, ref)
            names = ", ".join(ref.name for ref in refs)
            self.events.emit(app, "ShutdownRequested",
                             f"Asked the workload on {names} to shut down; waiting up to {grace} s")
            self.queue.add_after(key, grace)
            return False
        if now < deadline:
            self.queue.add_after(key, (deadline - now).total_seconds())
            return False
        self.events.emit(app, "ShutdownTimedOut",
                         f"No shutdown confirmed within {grace} s: removing it anyway",
                         type="Warning")  # fmt: skip
        return True

    async def _ask_to_shut_down(self, app: Application, ref: ResourceRef) -> None:
        """``PUT /shutdown`` to the workload through its Service (the one named ``shutdown``,
        else the manifest's first Service), reached on the cluster's host and node port."""
        if self._elsewhere(app, ref):
            return
        objects = app.status.last_applied_manifest or app.spec.manifest
        try:
            applier = await self.applier(ref, ReasonCode.DELETE_FAILED)
            spec = planner.removal(Owner.of(app), ref, objects, self._namespace_on(app, ref))
            address = await applier.shutdown_address(spec)
            if self._http is None:
                self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
            async with self._http.put(f"http://{address}/shutdown") as answer:
                problem = f"{address} answered HTTP {answer.status}"
                if answer.status < 400:
                    return
        except NoAddress as error:
            problem = str(error)
        except (KubeFailure, KubeUnreachable, KubeApiError, aiohttp.ClientError,
                TimeoutError, OSError) as error:  # fmt: skip
            problem = f"{type(error).__name__}: {error}"
        self.events.emit(app, "ShutdownNotReached",
                         f"Could not ask the workload on {ref.name} to shut down: {problem}",
                         type="Warning")  # fmt: skip

    async def remove_from_old(self, app: Application, old: ResourceRef) -> Obj | None:
        """Delete the old copy after a migration; what could not be removed is returned.

        An unreachable old cluster (often the reason for the move) does not hold
        the migration up: the copy is remembered in ``status.pending_cleanups``
        and removed when the cluster answers again.
        """
        objects = app.status.last_applied_manifest or app.spec.manifest
        if self._elsewhere(app, old) or self.cluster(old) is None:
            return None  # the cluster is gone from Shoal: nothing to come back to
        spec = planner.removal(Owner.of(app), old, objects, self._namespace_on(app, old))
        try:
            applier = await self.applier(old, ReasonCode.DELETE_FAILED)
            await applier.remove(spec)
        except (KubeFailure, KubeUnreachable, KubeApiError) as error:
            log.warning(
                "application %s/%s: old copy on %s not removed yet: %s",
                app.metadata.namespace,
                app.metadata.name,
                old.name,
                error,
            )
            return {
                "cluster": old.model_dump(mode="json"),
                "objects": [stub(obj) for obj in objects],
            }
        return None

    async def _cleanup(self, app: Application) -> Application:
        """Retry removing copies left on clusters that did not answer during a migration."""
        key = cache_key(app)
        keep: list[Obj] = []
        now = asyncio.get_running_loop().time()
        for entry in app.status.pending_cleanups:
            ref = cleanup_ref(entry)
            if ref is None or self._elsewhere(app, ref):
                continue  # dropped: no cluster, or one it never ran on
            cluster = self.cluster(ref)
            if cluster is None or cluster.spec.kubeconfig is None:
                continue  # the cluster is gone from Shoal
            objects: list[Obj] = list(entry.get("objects") or [])
            namespace = self._namespace_on(app, ref)
            if ref in placed_on(app.status):
                # back where it was: only what the manifest no longer has is stale
                current = {obj_key(obj, namespace) for obj in self.desired(app)}
                objects = [obj for obj in objects if obj_key(obj, namespace) not in current]
                if not objects:
                    continue
            tried = self._cleanup_tried.get((key, ref_key(ref)))
            if tried is not None and now - tried < self.cleanup_retry:
                keep.append(entry)
                self.queue.add_after(key, self.cleanup_retry - (now - tried))
                continue
            self._cleanup_tried[(key, ref_key(ref))] = now
            try:
                applier = await self._applier_of(cluster)
                spec = planner.removal(Owner.of(app), ref, objects, namespace)
                await applier.remove(spec, whole=ref not in placed_on(app.status))
            except (KubeUnreachable, KubeApiError) as error:
                log.info(
                    "application %s/%s: old copy on %s still not removed: %s",
                    app.metadata.namespace,
                    app.metadata.name,
                    ref.name,
                    error,
                )
                keep.append(entry)
                self.queue.add_after(key, self.cleanup_retry)
                continue
            self._cleanup_tried.pop((key, ref_key(ref)), None)
            log.info("application %s/%s: old copy on %s removed",
                     app.metadata.namespace, app.metadata.name, ref.name)  # fmt: skip
        return await self.write(app, {"pending_cleanups": keep})

    async def _remove_orphans(self, cluster: Cluster) -> None:
        """Copies of deleted applications left on a cluster that did not answer then."""
        key = cache_key(cluster)
        try:
            applier = await self._applier_of(cluster)
            left: list[tuple[str, Obj, Owner]] = []
            for namespace, obj, owner in self.orphans.get(key, []):
                try:
                    await applier.remove(planner.removal(owner, applier.cluster, [obj], namespace))
                except (KubeUnreachable, KubeApiError):
                    left.append((namespace, obj, owner))
            if left:
                self.orphans[key] = left
            else:
                self.orphans.pop(key, None)
        except (KubeUnreachable, KubeApiError) as error:
            log.info("cluster %s: orphaned copies not removed yet: %s", key[1], error)
        finally:
            self._orphan_tasks.pop(key, None)

    async def _delete(self, app: Application) -> None:
        """Remove what the application owns from its clusters, then its finalizer."""
        if KUBE_FINALIZER not in app.metadata.finalizers:
            return
        me = Owner.of(app)
        if not await self.shut_down_first(app, runs_on(app.status)):
            return
        app = await self.write(app, {"deploy_state": ApplicationState.DELETING})
        status = app.status
        desired = self.desired(app)
        objects = list(reversed(status.last_applied_manifest or desired))
        seen = {ident(obj) for obj in objects}
        objects += [obj for obj in desired if ident(obj) not in seen]
        running = runs_on(status)
        refs = running + [ref for ref in placed_on(status) if ref not in running]
        for ref in refs:
            cluster = self.cluster(ref)
            if self._elsewhere(app, ref) or cluster is None or cluster.spec.kubeconfig is None:
                continue  # the cluster is gone, or not the application's: nothing to remove
            applier = await self.applier(ref, ReasonCode.DELETE_FAILED)
            spec = planner.removal(me, ref, objects, self._namespace_on(app, ref))
            try:
                left = await applier.remove(spec)
            except (KubeUnreachable, KubeApiError) as error:
                raise unreachable(error, ReasonCode.DELETE_FAILED) from error
            if left:
                self.queue.add_after(cache_key(app), self.poll_interval)
                return
        # copies left behind by migrations: best effort now, else when the cluster answers
        for entry in status.pending_cleanups:
            left_on = cleanup_ref(entry)
            if left_on is None or left_on in refs or self._elsewhere(app, left_on):
                continue
            cluster = self.cluster(left_on)
            if cluster is None or cluster.spec.kubeconfig is None:
                continue
            stale: list[Obj] = list(entry.get("objects") or [])
            namespace = self._namespace_on(app, left_on)
            try:
                applier = await self._applier_of(cluster)
                await applier.remove(planner.removal(me, left_on, stale, namespace))
            except (KubeUnreachable, KubeApiError):
                self.orphans.setdefault(cache_key(cluster), []).extend(
                    (namespace, o, me) for o in stale
                )
        with contextlib.suppress(NotFound):
            kept = [f for f in app.metadata.finalizers if f != KUBE_FINALIZER]
            app = await self.set_finalizers(app, kept)
        reasons.deleted(self.events, app, len(refs))

    async def set_finalizers(self, app: Application, finalizers: list[str]) -> Application:
        """Write the finalizers alone (``metadata.modified`` stays), on our copy's revision."""
        meta = app.metadata
        item = {"namespace": meta.namespace, "name": meta.name, "finalizers": finalizers}
        version = await self._answered(
            cache_key(app),
            self.finalizer_writes.write({**item, "resource_version": meta.resource_version}),
        )
        metadata = meta.model_copy(update={"finalizers": finalizers, "resource_version": version})
        # the same as stored: its echo needs no decoding
        return self.app_informer.known(app.model_copy(update={"metadata": metadata}))

    async def write(self, app: Application, fields: dict[str, Any]) -> Application:
        """Patch those of the controller's own status fields that differ (docs/status-ownership.md).

        No precondition: no other component writes these fields (the scheduler's
        and observer's writes meanwhile would only cost a 409 and a retry), and
        no decision is taken on a copy older than the controller's own last
        write (``reconcile`` waits for it).
        """
        status = app.status
        changed = {name: value for name, value in fields.items() if getattr(status, name) != value}
        if not changed:
            return app
        key = cache_key(app)
        item = {"namespace": key[0], "name": key[1], "status": changed}
        version = await self._answered(key, self.status_writes.write(item))
        # what the API stored, as far as the controller reads it back (state and reason,
        # derived by the API, come with the watch event)
        metadata = app.metadata.model_copy(update={"resource_version": version})
        written = app.model_copy(
            update={"metadata": metadata, "status": status.model_copy(update=changed)}
        )
        if written.status.pending_cleanups:  # copies left where they could not be removed
            self.queue.add_after(key, self.cleanup_retry)
        return written

    async def _answered(self, key: CacheKey, write: Awaitable[int]) -> int:
        """The revision one of our writes of ``key`` made, recorded as ours (``written``).

        Its event may come before its answer. The events of ``key`` meanwhile are held
        (``early``) until the answer says which one was its echo: the others queue a
        reconcile, as does any of them when the write failed.
        """
        if key in self.early:  # another write of it is in flight: that one decides
            return await write
        early = self.early[key] = []
        try:
            version = await write
        except BaseException:
            if self.early.pop(key, None):
                self.queue.add(key)
            raise
        self.early.pop(key, None)
        self.written[key] = max(self.written.get(key, 0), version)
        if any(revision != version for revision in early):
            self.queue.add(key)
        return version

    async def _failed(self, app: Application, failure: KubeFailure) -> None:
        """Record the reason and retry with the application's backoff settings."""
        key = cache_key(app)
        attempts = self.failures.get(key, 0) + 1
        self.failures[key] = attempts
        spec = app.spec
        log.info(
            "application %s/%s: %s (attempt %d): %s",
            key[0],
            key[1],
            failure.code.name,
            attempts,
            failure,
        )
        limit = spec.backoff_limit
        give_up = limit >= 0 and attempts > limit and app.metadata.deleted is None
        reasons.deploy_failed(self.events, app, failure.code.name, str(failure), attempts, limit)
        delay = spec.backoff_delay * (spec.backoff ** (attempts - 1) if spec.backoff else 1)
        message = str(failure)
        if failure.code is ReasonCode.CONFLICT:
            # Someone else's object will not go away by itself within a second: wait longer
            # each time, and say when the next try is (``retry`` tries at once).
            delay = max(float(spec.backoff_delay), 1.0) * 2 ** min(attempts - 1, 10)
            delay = min(delay, MAX_BACKOFF)
            message += (
                f" (attempt {attempts}; next in {delay:g} s, or at once with "
                f"'shoal kube app retry {app.metadata.name}')"
            )
        fields: dict[str, Any] = {
            "deploy_reason": Reason(code=failure.code, message=message[:1000]),
            "retries": attempts,
        }
        if give_up:
            fields["deploy_state"] = ApplicationState.FAILED
        with contextlib.suppress(ApiError, Unreachable):
            await self.write(app, fields)
            if give_up:
                self.failures.pop(key, None)  # a retry (state PENDING) starts afresh
        if give_up:
            return
        self.queue.add_after(key, min(max(float(delay), 0.1), MAX_BACKOFF))

