"""What a binding may name, and what it writes: the scheduler's commit of an application to
its clusters, and a cluster's to a cloud.

Checked and written on the stored JSON by ``Resources`` (one write per application, on
the scheduler's hot path); each refusal is a 422 naming the field.
"""

from __future__ import annotations

from typing import Any

from shoal.api.codec import rfc3339
from shoal.machinery.problems import ProblemError
from shoal.model.base import ResourceRef, utcnow
from shoal.model.subresources import ApplicationBinding


def check_ref(field: str, valid: bool, what: str) -> None:
    """Refuse (422) a reference at ``field`` that is not ``what`` it must be."""
    if not valid:
        reason = f"must reference {what}"
        raise ProblemError(422, f"{field}: {reason}", errors=[{"field": field, "reason": reason}])


def binding_refs(
    binding: ApplicationBinding, namespace: str | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The cluster and the placements a binding names, as JSON, once each is checked: a
    kubernetes Cluster of the application's namespace, the first placement's the cluster."""
    cluster_ref = binding.cluster
    valid = cluster_ref.kind == "Cluster" and cluster_ref.api == "kubernetes"
    check_ref("cluster", valid, "a kubernetes Cluster")
    check_ref(
        "cluster.namespace",
        cluster_ref.namespace == namespace,
        f"a Cluster of the application's namespace {namespace!r}",
    )
    cluster = cluster_ref.model_dump(mode="json")
    placements: list[dict[str, Any]] = []
    for index, share in enumerate(binding.placements or ()):
        ref = share.cluster
        field = f"placements[{index}].cluster"
        check_ref(field, ref.kind == "Cluster" and ref.api == "kubernetes",
                  "a kubernetes Cluster")  # fmt: skip
        check_ref(f"{field}.namespace", ref.namespace == namespace,
                  f"a Cluster of the application's namespace {namespace!r}")  # fmt: skip
        placements.append({"cluster": ref.model_dump(mode="json"), "replicas": share.replicas})
    if placements and placements[0]["cluster"] != cluster:
        check_ref("cluster", False, "the first cluster of placements")
    return cluster, placements


def bound(
    data: dict[str, Any],
    status: dict[str, Any],
    binding: ApplicationBinding,
    cluster: dict[str, Any],
    placements: list[dict[str, Any]],
) -> None:
    """An application's stored JSON ``data`` and its ``status``, bound as ``binding`` says."""
    now = rfc3339(utcnow())
    if status.get("scheduled_to") != cluster or status.get("scheduled") is None:
        status["scheduled"] = now
    status["scheduled_to"] = cluster
    if binding.triggered:
        status["kube_controller_triggered"] = now
    status["last_scheduled"] = now
    status["last_scheduled_to"] = cluster
    status["schedule_reason"] = None
    status["scheduler_retries"] = None
    status["scheduler_attempts"] = 0
    status["next_retry"] = None
    if binding.explanation is not None:
        status["scheduling"] = binding.explanation
    if placements or status.get("placements"):
        status["placements"] = placements
    owners = data["metadata"].setdefault("owners", [])
    for ref in [cluster, *(p["cluster"] for p in placements)]:
        if ref not in owners:
            owners.append(ref)  # as Krake's API does; its controllers rely on it


def check_cloud_ref(cloud: ResourceRef, namespace: str | None) -> None:
    """A cluster's binding names a Cloud of its namespace, or a GlobalCloud."""
    check_ref("cloud", cloud.kind in ("Cloud", "GlobalCloud"), "a Cloud or GlobalCloud")
    if cloud.kind == "Cloud":
        where = f"a Cloud of the cluster's namespace {namespace!r}"
        check_ref("cloud.namespace", cloud.namespace == namespace, where)
    else:
        check_ref("cloud.namespace", cloud.namespace is None, "no namespace (GlobalCloud)")
