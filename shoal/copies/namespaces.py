"""Where a manifest object without ``metadata.namespace`` goes on a member cluster.

As kubectl would place it, and as Krake does: in the namespace of the cluster's
kubeconfig context, ``default`` when the context names none. The namespace used
on each cluster is recorded in the application's ``status.kube_namespaces``
before anything is applied there, and the recorded one is kept: a context
changed later moves nothing. An application that ran on a cluster before the
record was kept ran in a Kubernetes namespace named after its Shoal namespace,
and stays there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from shoal.copies.objects import cleanup_ref
from shoal.machinery.kubeconfig import DEFAULT_NAMESPACE as DEFAULT
from shoal.machinery.kubeconfig import context_namespace
from shoal.machinery.names import is_kube_namespace
from shoal.model.base import ResourceRef
from shoal.model.kubernetes import Application, Cluster


def _ran_there_unrecorded(app: Application, ref: ResourceRef) -> bool:
    """Its status says it runs, or left a copy, on ``ref`` (written before records were kept)."""
    status = app.status
    if status.running_on == ref or any(copy.cluster == ref for copy in status.copies):
        return True
    return any(cleanup_ref(entry) == ref for entry in status.pending_cleanups)


def legacy(app: Application) -> str | None:
    """The namespace an application used before records were kept, its Shoal namespace's;
    None when that is no Kubernetes namespace (nothing without a namespace ran there)."""
    namespace = app.metadata.namespace or DEFAULT
    return namespace if is_kube_namespace(namespace) else None


def kube_namespace(app: Application, ref: ResourceRef, cluster: Cluster | None) -> str:
    """Where ``app``'s objects without a namespace go (or went) on cluster ``ref``."""
    recorded = app.status.kube_namespaces.get(ref.name)
    if recorded:
        return recorded
    if _ran_there_unrecorded(app, ref) and (before := legacy(app)) is not None:
        return before
    return context_namespace(cluster.spec.kubeconfig if cluster is not None else None)


def to_record(
    app: Application,
    refs: Iterable[ResourceRef],
    cluster_of: Callable[[ResourceRef], Cluster | None],
) -> dict[str, str] | None:
    """``status.kube_namespaces`` with each of ``refs`` recorded, or None when all are."""
    recorded = dict(app.status.kube_namespaces)
    for ref in refs:
        if ref.name not in recorded:
            recorded[ref.name] = kube_namespace(app, ref, cluster_of(ref))
    return None if recorded == app.status.kube_namespaces else recorded

