"""What the scheduler reads of the objects it watches, and the keys of its queues.

An application event that leaves what the scheduler reads equal is not decoded at all
(``reads``), and of its explanation only what the scheduler reads is cached (``kept``):
these are the scheduler's own view of an application, kept apart from the handlers so that
``tests/scheduler/test_quiet_events.py`` can hold them in step.
"""

from __future__ import annotations

import contextlib
from typing import Any

from shoal.model.application_status import placed_on, runs_on
from shoal.model.base import Kind, ResourceRef
from shoal.model.kubernetes import AppKey, Application


def placed_clusters(app: Application) -> set[tuple[str | None, str]]:
    """The clusters an application is placed on: its cluster, or each of its placements."""
    return {(r.namespace, r.name) for r in placed_on(app.status)}


def copy_clusters(app: Application) -> set[tuple[str | None, str]]:
    """The clusters an application's copies run on: where it runs, and what it left."""
    refs = runs_on(app.status)
    for entry in app.status.pending_cleanups:
        with contextlib.suppress(ValueError):
            refs.append(ResourceRef.model_validate(entry.get("cluster")))
    return {(r.namespace, r.name) for r in refs if r is not None}


# What the scheduler reads of an application's explanation (``status.scheduling``).
SCHEDULING_READ = ("spec_modified", "reschedule_requested", "summary")


def kept(raw: dict[str, Any]) -> dict[str, Any]:
    """An application event's object as the scheduler caches it: of its explanation, only
    what the scheduler reads (the rest, the ranking and the rejected clusters, is most of
    the object; it is never written back, since the scheduler patches its own fields)."""
    status = raw.get("status")
    if status and (scheduling := status.get("scheduling")):
        status["scheduling"] = {k: scheduling[k] for k in SCHEDULING_READ if k in scheduling}
    return raw


def reads(raw: dict[str, Any]) -> tuple[Any, ...]:
    """What the application handlers below read, from the decoded JSON: an update that
    leaves it equal (a finalizer, a hook token, most progress) is not decoded at all.

    Keep it in step with ``Scheduler._app_updated`` and ``ClusterIndex.update``
    (``tests/scheduler/test_quiet_events.py`` checks that it is).
    """
    meta = raw["metadata"]
    status = raw.get("status") or {}
    return (
        meta.get("modified"),
        meta.get("deleted"),
        status.get("state"),
        status.get("scheduled_to"),
        status.get("placements"),
        status.get("running_on"),
        status.get("copies"),
        status.get("pending_cleanups"),
        status.get("reschedule_requested"),
    )


def key_of(obj: Kind) -> AppKey:
    return (obj.metadata.namespace or "", obj.metadata.name)


def cloud_key(cloud: Kind) -> AppKey:
    """Key of a cloud's metric state sync: ``o:`` a Cloud, ``g:`` a GlobalCloud."""
    return (
        ("o:" if cloud.kind == "Cloud" else "g:") + (cloud.metadata.namespace or ""),
        cloud.metadata.name,
    )


def cluster_key(tag: str, cluster: Kind) -> AppKey:
    """Key of cluster work: ``c:`` sync its metric state, ``k:`` bind it to a cloud."""
    return (tag + (cluster.metadata.namespace or ""), cluster.metadata.name)


def ref_key(ref: ResourceRef | None) -> tuple[str | None, str] | None:
    """What identifies a reference (cheaper to compare than the model)."""
    return None if ref is None else (ref.namespace, ref.name)
