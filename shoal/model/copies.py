"""A copy of an application on one member cluster: what to run there, and how it runs.

``CopySpec`` is everything the applier of one cluster (``shoal.copies.applier``) needs to
run an application's copy there, computed on the hub by the planner (``shoal.kube.planner``)
from the application, its placement and its hooks: the objects exactly as they are applied.
``CopyReport`` is what the applier answers: the copy's status (``CopyStatus``) and what the
application's status keeps of it. Both are plain JSON, so that a copy can be carried to an
applier that runs beside the member cluster rather than on the hub.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field

from shoal.machinery.types import Obj
from shoal.model.base import Kind, Model, Reason, ResourceRef
from shoal.model.kubernetes import ApplicationState, ContainerHealth, CopyStatus


class CopySpec(Model):
    """One application's copy on one cluster, ready to apply."""

    app_namespace: str = Field(description="The application's namespace: with its name and")
    app_name: str = Field(description="uid, what the copy's owner labels name.")
    app_uid: str
    cluster: ResourceRef
    kube_namespace: str = Field(description="Where its objects without a namespace go.")
    manifest: list[Obj] = Field(
        description="The objects as applied: the share, the overrides and the hooks in."
    )
    observer_schema: list[Obj] = Field(
        default_factory=list,
        description="The observer schema in force for ``manifest`` (empty: each object's "
        "default schema).",
    )
    replicas: int | None = Field(default=None, description="Its share (None: the manifest's).")
    overwrite: bool = Field(default=False, description="``spec.conflict_resolution``.")
    previous: list[Obj] = Field(
        default_factory=list,
        description="What the application's status says was applied here last, observed "
        "fields included: they are applied again as they were, what the manifest no longer "
        "has is pruned, and objects without an owner among them are its own (from Krake).",
    )
    observed: list[Obj] = Field(
        default_factory=list,
        description="The last observation recorded (``last_observed_manifest``): an applier "
        "started afresh goes on from it when the cluster still matches.",
    )
    prune: bool = Field(
        default=False, description="Remove what ``previous`` has and ``manifest`` no longer has."
    )
    own: list[Obj] = Field(
        default_factory=list,
        description="Objects its application's status says it applied here: found without "
        "an owner (imported from Krake), they are labelled its own.",
    )


class Taken(Model):
    """An object taken over from another application of the same namespace."""

    what: str
    owner: str


class CopyReport(CopyStatus):
    """How the copy runs after an apply or a look (``CopyStatus``'s fields), and what the
    application's status keeps of it."""

    ready: bool = False
    health: ContainerHealth = Field(default_factory=ContainerHealth)
    services: dict[str, str] = Field(
        default_factory=dict, description="Each Service's address from outside the cluster."
    )
    last_applied_manifest: list[Obj] = Field(default_factory=list)
    last_observed_manifest: list[Obj] = Field(default_factory=list)
    applied: bool = Field(default=False, description="Something was applied (not only read).")
    drifted: list[str] = Field(default_factory=list, description="Objects changed by others.")
    taken: list[Taken] = Field(default_factory=list)


# the Copy kind: a pull cluster's copy, carried to its agent -------------------------------

COPY_FINALIZER = "shoal.kube/copy"
"""Held by a Copy until its cluster's agent removed its objects from the member cluster."""


def copy_name(application: str, cluster: str) -> str:
    """The Copy of ``application`` on ``cluster``: ``<application>:<cluster>``, readable and
    one per pair. Names may hold ``:`` themselves (``a:b`` on ``c``, ``a`` on ``b:c``) and
    are long: such a pair's name ends with a digest of both, so that no two pairs meet."""
    name = f"{application}:{cluster}"
    if ":" not in application and ":" not in cluster and len(name) <= 200:
        return name
    digest = hashlib.sha256(f"{application}\0{cluster}".encode()).hexdigest()[:16]
    return f"{application[:90]}:{cluster[:90]}-{digest}"


class CopyWork(CopySpec):
    """What a pull cluster's agent runs: the planner's ``CopySpec`` and its generation."""

    generation: int = Field(
        default=1, ge=1, description="Moves on each change of the copy (the hub's count)."
    )


class CopyState(Model):
    """What a pull cluster's agent reports of a copy: the ``CopyReport`` fields the hub
    reads back into the application's status, and the generation it answers."""

    generation: int = Field(default=0, description="The spec.generation this status answers.")
    ready: bool = False
    ready_replicas: int = 0
    state: ApplicationState | None = None
    reason: Reason | None = None
    health: ContainerHealth = Field(default_factory=ContainerHealth)
    services: dict[str, str] = Field(default_factory=dict)
    last_applied_manifest: list[Obj] = Field(default_factory=list)
    last_observed_manifest: list[Obj] = Field(default_factory=list)
    taken: list[Taken] = Field(default_factory=list)
    drift_repairs: int = Field(default=0, description="How often someone else's change was undone.")


class Copy(Kind):
    """One application's copy on one pull cluster: written by the hub's kube controller,
    run and answered by that cluster's agent (docs/pull-mode.md)."""

    api: Literal["kubernetes"] = "kubernetes"
    kind: Literal["Copy"] = "Copy"
    spec: CopyWork
    status: CopyState = Field(default_factory=CopyState)

    subresources = ("status", "finalizers")
    created_in_batches = True  # the copies of an application on its clusters, at once
