"""The hub's planner: an application → the copy each of its clusters must run.

A copy (``shoal.model.copies.CopySpec``) is the manifest with Krake's hooks put in
(``kube.hooks``), divided to the cluster's share and with the overrides that match the
cluster's labels merged in (``shoal.model.placement.copy_for``, the rule every side uses),
the Kubernetes namespace recorded for that cluster (``copies.namespaces``), and the
observer schema in force. An application bound to one cluster (``status.scheduled_to``)
is a placement of one copy that runs the whole manifest. The applier of each cluster
(``shoal.copies.applier``) runs the copies; the controller writes what they report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shoal.copies import observing
from shoal.copies.namespaces import kube_namespace
from shoal.copies.objects import ref_key
from shoal.copies.owners import Owner
from shoal.kube.hooks import HookSettings, with_hooks
from shoal.machinery.types import Obj
from shoal.model.application_status import runs_on
from shoal.model.base import ResourceRef
from shoal.model.copies import CopySpec
from shoal.model.kubernetes import Application, Cluster
from shoal.model.placement import copy_for

ClusterOf = Callable[[ResourceRef | None], Cluster | None]


def desired(app: Application, settings: HookSettings) -> list[Obj]:
    """The objects to apply: the manifest, with Krake's hooks put in (``kube.hooks``)."""
    status = app.status
    tokens = {"complete": status.complete_token, "shutdown": status.shutdown_token}
    where = (app.metadata.namespace or "default", app.metadata.name)
    return with_hooks(app.spec.manifest, app.spec.hooks, tokens, where, settings)


def placed(app: Application) -> list[tuple[ResourceRef, int | None]]:
    """Each cluster the application is placed on and its share (None: the whole manifest):
    ``status.placements``, else the one cluster it is bound to."""
    status = app.status
    if status.placements:
        return [(p.cluster, p.replicas) for p in status.placements]
    return [(status.scheduled_to, None)] if status.scheduled_to is not None else []


def copies(app: Application, settings: HookSettings, cluster_of: ClusterOf) -> list[CopySpec]:
    """The copy of each cluster the application is placed on, in the placement's order."""
    where = placed(app)
    manifest = desired(app, settings)
    shares: Sequence[int | None] = [share for _, share in where]
    overrides = app.spec.placement.overrides if app.spec.placement is not None else []
    out = []
    for index, (ref, share) in enumerate(where):
        objects = manifest
        if share is not None or overrides:  # else the whole manifest, as it is
            cluster = cluster_of(ref)
            labels = dict(cluster.metadata.labels) if cluster is not None else {}
            objects = copy_for(manifest, shares, index, labels, overrides)
        out.append(copy_on(app, ref, objects, cluster_of, replicas=share, alone=len(where) == 1))
    return out


def copy_on(
    app: Application,
    ref: ResourceRef,
    manifest: list[Obj],
    cluster_of: ClusterOf,
    *,
    replicas: int | None = None,
    alone: bool = True,
) -> CopySpec:
    """The copy of ``manifest`` on cluster ``ref``.

    What the application's status recorded of the copy it runs there (one copy: the
    status's manifests are that copy's) is where the applier goes on from: observed
    fields applied again as they were, objects without an owner taken as its own,
    what the manifest no longer has pruned. Several copies share no record of each; a
    copy the status lists there (``status.copies``) still takes the recorded objects
    without an owner as its own.
    """
    status = app.status
    here = alone and status.running_on == ref
    listed = here or any(ref_key(c.cluster) == ref_key(ref) for c in status.copies)
    return CopySpec.model_construct(
        app_namespace=app.metadata.namespace or "default",
        app_name=app.metadata.name,
        app_uid=app.metadata.uid or "",
        cluster=ref,
        kube_namespace=kube_namespace(app, ref, cluster_of(ref)),
        manifest=manifest,
        observer_schema=observing.schemas(app, manifest),
        replicas=replicas,
        overwrite=app.spec.conflict_resolution == "overwrite",
        previous=status.last_applied_manifest if alone else [],
        observed=status.last_observed_manifest if here else [],
        prune=here,
        own=status.last_applied_manifest if listed else [],
    )


def removal(owner: Owner, ref: ResourceRef, objects: list[Obj], namespace: str) -> CopySpec:
    """The copy of ``objects`` on ``ref`` (its objects without a namespace in ``namespace``),
    to be removed."""
    return CopySpec.model_construct(
        app_namespace=owner.namespace,
        app_name=owner.name,
        app_uid=owner.uid,
        cluster=ref,
        kube_namespace=namespace,
        manifest=objects,
        observer_schema=[],
        replicas=None,
        overwrite=False,
        previous=[],
        observed=[],
        prune=False,
        own=[],
    )


def leaving(app: Application) -> list[ResourceRef]:
    """The clusters that hold a copy of the application it no longer is placed on: their
    copies are removed once the new ones run."""
    wanted = {ref_key(ref) for ref, _ in placed(app)}
    return [ref for ref in runs_on(app.status) if ref_key(ref) not in wanted]
