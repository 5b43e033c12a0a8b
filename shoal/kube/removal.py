"""Removing an application's copies: after a migration, on deletion, and what was left.

A copy leaves a cluster the application no longer uses once the new copies run
(``kube.deploy``), after its workload was asked to shut down when the application has
Krake's shutdown hook. A cluster that does not answer then keeps the copy in
``status.pending_cleanups`` until it does; a deleted application's copies on such a
cluster are kept as orphans of the controller until it answers. Deletion removes the
copies from every cluster, then the finalizer ``shoal.kube/resources``. A cluster that
is registered again or comes back is pruned of what no application uses there.
Each removal is its cluster's ``Applier``'s (``shoal.copies.applier``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

import aiohttp

from shoal.client.informer import CacheKey, cache_key
from shoal.client.kube import KubeApiError, KubeUnreachable
from shoal.client.rest import NotFound
from shoal.copies.applier import PRUNED_KINDS, Applier, NoAddress
from shoal.copies.member import KubeFailure, obj_key, unreachable
from shoal.copies.namespaces import kube_namespace
from shoal.copies.objects import cleanup_ref, clusters_of, ident, outside, ref_key, stub
from shoal.copies.owners import Owner
from shoal.events import reasons
from shoal.kube import planner
from shoal.kube.hub import Hub, Runner
from shoal.kube.pulled import PulledCopies, managed
from shoal.machinery.types import Obj
from shoal.model.application_status import placed_on, runs_on
from shoal.model.base import ReasonCode, ResourceRef, utcnow
from shoal.model.kubernetes import KUBE_FINALIZER, Application, ApplicationState, Cluster

log = logging.getLogger(__name__)


def elsewhere(hub: Hub, app: Application, ref: ResourceRef | None) -> bool:
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
    hub.events.emit(app, "OutsideNamespace", message, type="Warning")
    return True


def namespace_on(hub: Hub, app: Application, ref: ResourceRef) -> str:
    """Where ``app``'s objects without a namespace are on ``ref`` (``kube.namespaces``)."""
    return kube_namespace(app, ref, hub.cluster(ref))


async def shut_down_first(hub: Hub, app: Application, refs: list[ResourceRef]) -> bool:
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
        await hub.write(app, {"deploy_state": ApplicationState.WAITING_FOR_CLEANING,
                                "deploy_reason": None, "shutdown_grace_period": deadline})
        for ref in refs:
            await _ask_to_shut_down(hub, app, ref)
        names = ", ".join(ref.name for ref in refs)
        hub.events.emit(app, "ShutdownRequested",
                         f"Asked the workload on {names} to shut down; waiting up to {grace} s")
        hub.queue.add_after(key, grace)
        return False
    if now < deadline:
        hub.queue.add_after(key, (deadline - now).total_seconds())
        return False
    hub.events.emit(app, "ShutdownTimedOut",
                     f"No shutdown confirmed within {grace} s: removing it anyway",
                     type="Warning")  # fmt: skip
    return True


async def _ask_to_shut_down(hub: Hub, app: Application, ref: ResourceRef) -> None:
    """``PUT /shutdown`` to the workload through its Service (the one named ``shutdown``,
    else the manifest's first Service), reached on the cluster's host and node port."""
    if elsewhere(hub, app, ref):
        return
    objects = app.status.last_applied_manifest or app.spec.manifest
    try:
        applier = await hub.applier(ref, ReasonCode.DELETE_FAILED)
        spec = planner.removal(Owner.of(app), ref, objects, namespace_on(hub, app, ref))
        address = await applier.shutdown_address(spec)
        async with hub.http().put(f"http://{address}/shutdown") as answer:
            problem = f"{address} answered HTTP {answer.status}"
            if answer.status < 400:
                return
    except NoAddress as error:
        problem = str(error)
    except (KubeFailure, KubeUnreachable, KubeApiError, aiohttp.ClientError,
            TimeoutError, OSError) as error:  # fmt: skip
        problem = f"{type(error).__name__}: {error}"
    hub.events.emit(app, "ShutdownNotReached",
                     f"Could not ask the workload on {ref.name} to shut down: {problem}",
                     type="Warning")  # fmt: skip


async def remove_from_old(hub: Hub, app: Application, old: ResourceRef) -> Obj | None:
    """Delete the old copy after a migration; what could not be removed is returned.

    An unreachable old cluster (often the reason for the move) does not hold
    the migration up: the copy is remembered in ``status.pending_cleanups``
    and removed when the cluster answers again. So is one the application was placed
    on again meanwhile (``as_it_is``): ``cleanup`` then removes only what its manifest
    no longer has.
    """
    objects = app.status.last_applied_manifest or app.spec.manifest
    if elsewhere(hub, app, old) or hub.cluster(old) is None:
        return None  # the cluster is gone from Shoal: nothing to come back to
    spec = planner.removal(Owner.of(app), old, objects, namespace_on(hub, app, old))
    left = {"cluster": old.model_dump(mode="json"), "objects": [stub(obj) for obj in objects]}
    try:
        applier = await hub.applier(old, ReasonCode.DELETE_FAILED)
        if old in placed_on((await as_it_is(hub, app, applier)).status):
            return left  # placed there again meanwhile: ``cleanup`` keeps its copy there
        await applier.remove(spec)
    except (KubeFailure, KubeUnreachable, KubeApiError) as error:
        log.warning(
            "application %s/%s: old copy on %s not removed yet: %s",
            app.metadata.namespace,
            app.metadata.name,
            old.name,
            error,
        )
        return left
    return None


async def as_it_is(hub: Hub, app: Application, runner: Runner) -> Application:
    """``app`` as the API holds it once ``runner``'s cluster answers.

    What to remove from a cluster is decided on this, not on the copy a reconcile began
    with: a cluster that did not answer may answer only after the application was placed
    on it again, and its copy there is then the live one. A pull cluster's copies are
    the API's ``Copy`` objects: nothing to wait for there.
    """
    if isinstance(runner, Applier):
        with contextlib.suppress(KubeApiError):  # any answer is an answer
            await runner.kube.request("GET", "/version")
    fresh = await hub.client.get(Application, app.metadata.name, app.metadata.namespace)
    return fresh if fresh.metadata.uid == app.metadata.uid else app


async def cleanup(hub: Hub, app: Application) -> Application:
    """Retry removing copies left on clusters that did not answer during a migration.

    Back on such a cluster meanwhile, the application keeps its copy there: only what
    its manifest no longer has goes (decided once the cluster answers, ``as_it_is``).
    """
    key = cache_key(app)
    keep: list[Obj] = []
    now = asyncio.get_running_loop().time()
    for entry in app.status.pending_cleanups:
        ref = cleanup_ref(entry)
        if ref is None or elsewhere(hub, app, ref):
            continue  # dropped: no cluster, or one it never ran on
        cluster = hub.cluster(ref)
        if cluster is None or not managed(cluster):
            continue  # the cluster is gone from Shoal
        if not _stale(hub, app, ref, entry):
            continue
        tried = hub.cleanup_tried.get((key, ref_key(ref)))
        if tried is not None and now - tried < hub.cleanup_retry:
            keep.append(entry)
            hub.queue.add_after(key, hub.cleanup_retry - (now - tried))
            continue
        hub.cleanup_tried[(key, ref_key(ref))] = now
        try:
            applier = await hub.runner_of(cluster)
            current = await as_it_is(hub, app, applier)
            objects = _stale(hub, current, ref, entry)
            if objects:
                spec = planner.removal(Owner.of(app), ref, objects, namespace_on(hub, current, ref))
                await applier.remove(spec, whole=ref not in placed_on(current.status))
        except (KubeUnreachable, KubeApiError) as error:
            log.info(
                "application %s/%s: old copy on %s still not removed: %s",
                app.metadata.namespace,
                app.metadata.name,
                ref.name,
                error,
            )
            keep.append(entry)
            hub.queue.add_after(key, hub.cleanup_retry)
            continue
        hub.cleanup_tried.pop((key, ref_key(ref)), None)
        log.info("application %s/%s: old copy on %s removed",
                 app.metadata.namespace, app.metadata.name, ref.name)  # fmt: skip
    return await hub.write(app, {"pending_cleanups": keep})


def _stale(hub: Hub, app: Application, ref: ResourceRef, entry: Obj) -> list[Obj]:
    """What of a copy left on ``ref`` is to go: all of it, or, the application being back
    there, only what its manifest no longer has."""
    objects: list[Obj] = list(entry.get("objects") or [])
    if ref not in placed_on(app.status):
        return objects
    namespace = namespace_on(hub, app, ref)
    current = {obj_key(obj, namespace) for obj in hub.desired(app)}
    return [obj for obj in objects if obj_key(obj, namespace) not in current]


def retry_left_on(hub: Hub, cluster: Cluster) -> None:
    """``cluster`` changed (it may answer again): the clean-ups waiting on it are tried at
    its applications' next reconcile, not after their retry delay, and the copies deleted
    applications left there are removed now."""
    key = cache_key(cluster)
    for tried in [t for t in hub.cleanup_tried if t[1] == key]:
        del hub.cleanup_tried[tried]
    if key in hub.orphans and key not in hub.orphan_tasks:
        hub.orphan_tasks[key] = asyncio.create_task(remove_orphans(hub, cluster))


async def remove_orphans(hub: Hub, cluster: Cluster) -> None:
    """Copies of deleted applications left on a cluster that did not answer then."""
    key = cache_key(cluster)
    try:
        applier = await hub.runner_of(cluster)
        left: list[tuple[str, Obj, Owner]] = []
        for namespace, obj, owner in hub.orphans.get(key, []):
            try:
                await applier.remove(planner.removal(owner, applier.cluster, [obj], namespace))
            except (KubeUnreachable, KubeApiError):
                left.append((namespace, obj, owner))
        if left:
            hub.orphans[key] = left
        else:
            hub.orphans.pop(key, None)
    except (KubeUnreachable, KubeApiError) as error:
        log.info("cluster %s: orphaned copies not removed yet: %s", key[1], error)
    finally:
        hub.orphan_tasks.pop(key, None)


def stop_orphans(hub: Hub) -> None:
    """The controller stops: the removals of orphans under way stop with it (what is left
    is pruned when a controller next connects to the cluster)."""
    for task in list(hub.orphan_tasks.values()):
        task.cancel()
    hub.orphan_tasks.clear()


async def delete(hub: Hub, app: Application) -> None:
    """Remove what the application owns from its clusters, then its finalizer."""
    if KUBE_FINALIZER not in app.metadata.finalizers:
        return
    me = Owner.of(app)
    if not await shut_down_first(hub, app, runs_on(app.status)):
        return
    app = await hub.write(app, {"deploy_state": ApplicationState.DELETING})
    status = app.status
    desired = hub.desired(app)
    objects = list(reversed(status.last_applied_manifest or desired))
    seen = {ident(obj) for obj in objects}
    objects += [obj for obj in desired if ident(obj) not in seen]
    running = runs_on(status)
    refs = running + [ref for ref in placed_on(status) if ref not in running]
    for ref in refs:
        cluster = hub.cluster(ref)
        if elsewhere(hub, app, ref) or cluster is None or not managed(cluster):
            continue  # the cluster is gone, or not the application's: nothing to remove
        applier = await hub.applier(ref, ReasonCode.DELETE_FAILED)
        spec = planner.removal(me, ref, objects, namespace_on(hub, app, ref))
        try:
            left = await applier.remove(spec)
        except (KubeUnreachable, KubeApiError) as error:
            raise unreachable(error, ReasonCode.DELETE_FAILED) from error
        if left:
            hub.queue.add_after(cache_key(app), hub.poll_interval)
            return
    # copies left behind by migrations: best effort now, else when the cluster answers
    for entry in status.pending_cleanups:
        left_on = cleanup_ref(entry)
        if left_on is None or left_on in refs or elsewhere(hub, app, left_on):
            continue
        cluster = hub.cluster(left_on)
        if cluster is None or not managed(cluster):
            continue
        stale: list[Obj] = list(entry.get("objects") or [])
        namespace = namespace_on(hub, app, left_on)
        try:
            applier = await hub.runner_of(cluster)
            await applier.remove(planner.removal(me, left_on, stale, namespace))
        except (KubeUnreachable, KubeApiError):
            hub.orphans.setdefault(cache_key(cluster), []).extend(
                (namespace, o, me) for o in stale
            )
    with contextlib.suppress(NotFound):
        kept = [f for f in app.metadata.finalizers if f != KUBE_FINALIZER]
        app = await hub.set_finalizers(app, kept)
    reasons.deleted(hub.events, app, len(refs))


def uses(hub: Hub, owner: Owner, where: CacheKey) -> bool:
    """``owner``'s application uses cluster ``where`` (``scheduled_to``, ``running_on``, a
    placement, a pending clean-up), as the informer has it now: a prune asks this right
    before each delete, not once for all of them (the application may come back to the
    cluster while the deletes before its own go out)."""
    app = hub.app_informer.get(owner.name, owner.namespace)
    if app is None or app.metadata.uid != owner.uid:
        return False
    return any(ref_key(ref) == where for ref in clusters_of(app))


async def prune_copies(hub: Hub, cluster: Cluster) -> None:
    """``prune`` for a pull cluster: its Copies whose application is gone or does not use
    it (``scheduled_to``, ``running_on``, a placement, a pending clean-up) are deleted,
    and its agent removes their objects. Such a Copy is one written for a move to this
    cluster that the application left before the agent answered it: no status records
    it, so nothing else would remove it."""
    pulled = await hub.runner_of(cluster)
    if not isinstance(pulled, PulledCopies) or cluster.metadata.deleted is not None:
        return
    await hub.app_informer.wait_synced()
    where = ref_key(pulled.cluster)
    try:
        pruned = await pulled.prune(lambda copy: uses(hub, Owner(
            copy.spec.app_namespace, copy.spec.app_name, copy.spec.app_uid), where))
    except Exception as error:  # a background task's top level: the next round tries again
        log.warning("cluster %s: copies not pruned: %s", where[1], error)
        return
    if pruned:
        log.info("cluster %s: %d copies of applications that do not use it deleted",
                 where[1], pruned)  # fmt: skip


async def prune(hub: Hub, applier: Applier) -> None:
    """Remove what Shoal left on a cluster it connects to and no longer uses there.

    A cluster that was deleted while it did not answer, or while an application on it
    was being deleted, and is registered again (same name, same server) may hold
    copies nothing else will remove: every object labelled as an application's whose
    application is gone, or does not use this cluster (``scheduled_to``,
    ``running_on``, a pending clean-up), is deleted (``Applier.prune``). Kinds
    looked at: those of every application's manifest, and the common workload kinds.
    """
    await hub.app_informer.wait_synced()
    where = applier.key
    kinds: set[tuple[str, str]] = set(PRUNED_KINDS)
    for app in hub.app_informer.items():
        for obj in app.spec.manifest:
            api_version, kind = obj.get("apiVersion"), obj.get("kind")
            if isinstance(api_version, str) and isinstance(kind, str):
                kinds.add((api_version, kind))

    # Read after the lists: an object listed was applied by this controller, which had
    # seen its application's binding, so the informer has it now.
    pruned = await applier.prune(kinds, lambda owner: uses(hub, owner, where))
    if pruned:
        log.info("cluster %s: %d objects of applications that do not use it removed",
                 where[1], pruned)

