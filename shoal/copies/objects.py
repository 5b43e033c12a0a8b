"""The manifest objects as the application controller sees them.

Their identity, the part of a live object that drift is judged on, readiness
and container health, and the records of copies left to clean up on a cluster
that did not answer. Pure functions: the controller's I/O stays in ``controller``.
"""

from __future__ import annotations

from typing import Any

from shoal.copies.watch import ClusterKey, Entry
from shoal.machinery.names import is_kube_namespace
from shoal.machinery.types import Obj
from shoal.model.application_status import placed_on, runs_on
from shoal.model.base import ResourceRef
from shoal.model.kubernetes import Application, ContainerHealth


def ref_key(ref: ResourceRef) -> tuple[str | None, str]:
    """The (namespace, name) key of the resource ``ref`` points to, as ``cache_key`` gives."""
    return (ref.namespace, ref.name)


def workload_health(obj: Obj) -> tuple[bool, ContainerHealth]:
    """Whether a live object is ready, and the pods it accounts for."""
    kind = obj.get("kind")
    spec: Obj = obj.get("spec") or {}
    status: Obj = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    current = generation is None or observed is None or observed >= generation
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        desired = int(spec.get("replicas", 1))
        ready = int(status.get("readyReplicas") or 0)
        updated = int(status.get("updatedReplicas", ready) or 0)
        ok = current and ready >= desired and updated >= desired
        if kind == "Deployment":
            ok = ok and int(status.get("replicas") or 0) <= desired  # old pods gone
        return ok, ContainerHealth(desired_pods=desired, running_pods=ready)
    if kind == "DaemonSet":
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        return current and ready >= desired, ContainerHealth(
            desired_pods=desired, running_pods=ready
        )
    if kind == "Job":
        desired = int(spec.get("completions") or 1)
        return True, ContainerHealth(
            desired_pods=desired,
            running_pods=int(status.get("active") or 0),
            completed_pods=int(status.get("succeeded") or 0),
            failed_pods=int(status.get("failed") or 0),
        )
    if kind == "Pod":
        phase = status.get("phase")
        return phase == "Running", ContainerHealth(
            desired_pods=1,
            running_pods=int(phase == "Running"),
            completed_pods=int(phase == "Succeeded"),
            failed_pods=int(phase == "Failed"),
        )
    return True, ContainerHealth()


_BOOKKEEPING = frozenset(("resourceVersion", "managedFields"))


def tells_anything(before: Obj | None, after: Obj) -> bool:
    """Whether a newer version of a live object can change a reconcile's outcome.

    A reconcile reads a live object's fields outside ``status`` (drift, ownership,
    deletion) and, of its status, only its readiness and pods (``workload_health``).
    The server's bookkeeping (resourceVersion, managedFields) tells nothing.
    """
    if before is None:
        return True
    for key in before.keys() | after.keys():
        if key == "metadata":
            old, new = before.get(key) or {}, after.get(key) or {}
            if {k: v for k, v in old.items() if k not in _BOOKKEEPING} != {
                k: v for k, v in new.items() if k not in _BOOKKEEPING
            }:
                return True
        elif key != "status" and before.get(key) != after.get(key):
            return True
    return workload_health(before) != workload_health(after)


def ident(obj: Obj) -> tuple[str, str, str | None, str]:
    meta = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


def stub(obj: Obj) -> Obj:
    """Enough of a manifest object to find and delete it."""
    meta: Obj = {"name": obj["metadata"]["name"]}
    if obj["metadata"].get("namespace"):
        meta["namespace"] = obj["metadata"]["namespace"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta}


def combined_health(lives: list[Obj | None]) -> tuple[bool, ContainerHealth]:
    """Whether every live object is there and ready, and the pods they account for."""
    total = ContainerHealth()
    all_ready = True
    for live in lives:
        if live is None:
            all_ready = False
            continue
        ready, health = workload_health(live)
        all_ready = all_ready and ready
        total.desired_pods += health.desired_pods
        total.running_pods += health.running_pods
        total.completed_pods += health.completed_pods
        total.failed_pods += health.failed_pods
    return all_ready, total


def cleanup_ref(entry: Obj) -> ResourceRef | None:
    try:
        return ResourceRef.model_validate(entry.get("cluster"))
    except ValueError:
        return None


def merge_cleanup(cleanups: list[Obj], entry: Obj) -> list[Obj]:
    """Add a left-behind copy; one entry per cluster."""
    out: list[Obj] = []
    merged = False
    for old in cleanups:
        if old.get("cluster") == entry["cluster"]:
            objects = list(old.get("objects") or [])
            objects += [o for o in entry["objects"] if o not in objects]
            out.append({"cluster": entry["cluster"], "objects": objects})
            merged = True
        else:
            out.append(old)
    if not merged:
        out.append(entry)
    return out


def outside(app: Application, ref: ResourceRef | None) -> bool:
    """``ref`` names a cluster outside the application's namespace: never acted on.

    The API binds an application only to clusters of its namespace and lets
    no tenant write the status fields that name clusters; the controller still
    checks each reference where it uses it, since it acts with that cluster's
    credentials.
    """
    return ref is not None and ref.namespace != app.metadata.namespace


def clusters_of(app: Application) -> list[ResourceRef]:
    """Every cluster an application uses: bound to, running on, placed on, copied to, and
    left a copy on (a pending clean-up)."""
    status = app.status
    left = [cleanup_ref(entry) for entry in status.pending_cleanups]
    return [*placed_on(status), *runs_on(status), *(ref for ref in left if ref is not None)]


def placement(app: Application) -> tuple[Any, ...]:
    """What the watched objects of ``app`` depend on (most events change none of it)."""
    status = app.status
    return (placed_on(status), runs_on(status), app.spec.manifest, status.last_applied_manifest,
            status.kube_namespaces)  # fmt: skip


def watch_entries(app: Application) -> set[Entry]:
    """The objects of ``app`` on the clusters it is bound to, placed on or runs on."""
    status = app.status
    refs = [*placed_on(status), *runs_on(status)]
    objects = [*app.spec.manifest, *status.last_applied_manifest]
    return _entries(
        app.metadata.namespace, [ref_key(r) for r in refs], objects, status.kube_namespaces
    )


def triggered(app: Application) -> bool:
    """The scheduler saw the latest spec (the kube_controller_triggered handshake)."""
    when = app.status.kube_controller_triggered
    modified = app.metadata.modified
    return when is not None and (modified is None or when >= modified)


def raw_watch_entries(app: Obj) -> set[Entry]:
    """``watch_entries`` of an application as decoded JSON (no model built)."""
    status: Obj = app.get("status") or {}
    found = [status.get("scheduled_to"), status.get("running_on")]
    found += [entry.get("cluster") for entry in status.get("placements") or ()]
    found += [entry.get("cluster") for entry in status.get("copies") or ()]
    refs = [(ref.get("namespace"), ref["name"]) for ref in found if ref]
    manifest = (app.get("spec") or {}).get("manifest") or []
    objects = [*manifest, *(status.get("last_applied_manifest") or [])]
    recorded = status.get("kube_namespaces") or {}
    return _entries(app["metadata"].get("namespace"), refs, objects, recorded)


def unread(app: Obj, written: int | None, entries: set[Entry] | None) -> bool:
    """An application event the kube controller need not decode (``app`` as JSON).

    Two of an application's three events are: its creation (not yet bound:
    a reconcile finds nothing to do) and the echo of the controller's own
    write (``written``: RUNNING). ``entries`` (the watched objects, None when
    nothing is watched) must stay the same. An application unbound while it
    runs somewhere (its cluster is being deleted) is read: it is withdrawn.
    """
    meta = app["metadata"]
    if meta.get("resource_version") != written:  # not our echo
        status = app.get("status") or {}
        if (
            meta.get("deleted")
            or status.get("scheduled_to")
            or status.get("running_on")
            or status.get("pending_cleanups")
        ):
            return False
    return entries is None or raw_watch_entries(app) == entries


def unexplained(raw: dict[str, Any]) -> dict[str, Any]:
    """An application event's object without the scheduler's explanation, which the kube
    controller never reads nor writes back (its status writes are patches of its own
    fields): most of the object, built and kept for nothing."""
    status = raw.get("status")
    if status and status.get("scheduling") is not None:
        status["scheduling"] = None
    return raw


def _entries(
    namespace: str | None, refs: list[ClusterKey], objects: list[Obj], recorded: dict[str, str]
) -> set[Entry]:
    """Each object on each cluster of the application's namespace (no other is watched).

    An object without a namespace is where ``status.kube_namespaces`` says it went on
    that cluster (``shoal.copies.namespaces``); unrecorded, in the Kubernetes namespace
    named after the application's, where a copy applied before the record ran (a
    namespace that is no Kubernetes name held none: such a cluster waits for its record).
    """
    refs = [ref for ref in refs if ref[0] == namespace]
    legacy = namespace or "default"
    entries: set[Entry] = set()
    for ref in refs:
        default = recorded.get(ref[1]) or legacy
        if not is_kube_namespace(default):
            continue
        for obj in objects:
            try:
                api_version, kind, ns, name = ident(obj)
            except (KeyError, TypeError):
                continue
            entries.add((ref, (api_version, kind, ns or default, name)))
    return entries
