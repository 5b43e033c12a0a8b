"""Pure functions of the kube controller."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shoal.copies.objects import (
    raw_watch_entries,
    tells_anything,
    unread,
    watch_entries,
    workload_health,
)
from shoal.kube.controller import triggered
from shoal.model.base import ResourceRef
from tests.kube.conftest import application


def test_triggered_handshake() -> None:
    app = application("a")
    now = datetime.now(UTC)
    app.metadata.modified = now
    assert not triggered(app)  # never bound
    app.status.kube_controller_triggered = now - timedelta(seconds=1)
    assert not triggered(app)  # spec updated after the scheduler saw it
    app.status.kube_controller_triggered = now
    assert triggered(app)


def test_raw_watch_entries_match_the_model() -> None:
    app = application("a")
    bare = app.model_dump(mode="json", exclude_defaults=True)
    assert raw_watch_entries(bare) == watch_entries(app) == set()
    assert unread(bare, None, set())  # not bound yet: nothing to do
    cluster = ResourceRef(api="infrastructure", kind="Cluster", namespace="default", name="c")
    app.status.scheduled_to = cluster
    app.metadata.resource_version = 5
    bound = app.model_dump(mode="json", exclude_defaults=True)
    entries = watch_entries(app)
    assert entries and raw_watch_entries(bound) == entries
    assert not unread(bound, None, set())  # bound: a reconcile applies it
    assert unread(bound, 5, entries)  # the echo of our own write
    assert not unread(bound, 5, set())  # ... unless the watched objects change
    app.status.running_on = cluster
    app.status.last_applied_manifest = app.spec.manifest
    assert raw_watch_entries(app.model_dump(mode="json")) == watch_entries(app) == entries
    app.status.scheduled_to = None  # unbound where it runs (its cluster is being deleted)
    unbound = app.model_dump(mode="json", exclude_defaults=True)
    assert raw_watch_entries(unbound) == entries
    assert not unread(unbound, None, entries)  # a reconcile withdraws it


def test_workload_health() -> None:
    dep: dict[str, Any] = {
        "kind": "Deployment",
        "metadata": {"generation": 2},
        "spec": {"replicas": 3},
        "status": {
            "observedGeneration": 2,
            "replicas": 3,
            "readyReplicas": 3,
            "updatedReplicas": 3,
        },
    }
    ready, health = workload_health(dep)
    assert ready and health.desired_pods == 3 and health.running_pods == 3
    dep["status"]["readyReplicas"] = 1
    assert not workload_health(dep)[0]
    dep["status"]["readyReplicas"] = 3
    dep["status"]["observedGeneration"] = 1  # the controller has not seen the new spec yet
    assert not workload_health(dep)[0]
    assert workload_health({"kind": "ConfigMap"})[0]


def test_tells_anything_of_a_live_object() -> None:
    """What wakes an application: its objects' fields, their readiness, and not the rest."""
    dep: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "resourceVersion": "7", "generation": 1, "labels": {"a": "1"}},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1},
    }

    def changed(**fields: Any) -> dict[str, Any]:
        new = {**dep, "metadata": {**dep["metadata"], "resourceVersion": "8"}}
        for name, value in fields.items():
            part, key = name.split("__")
            new[part] = {**new[part], key: value}
        return new

    assert tells_anything(None, dep)  # first seen
    assert not tells_anything(dep, dep)
    assert not tells_anything(dep, changed())  # bookkeeping alone
    assert not tells_anything(dep, changed(metadata__managedFields=[{"manager": "x"}]))
    assert not tells_anything(dep, changed(status__conditions=[{"type": "Progressing"}]))
    assert tells_anything(dep, changed(status__readyReplicas=1))  # now ready
    assert tells_anything(dep, changed(spec__replicas=2))  # drift
    assert tells_anything(dep, changed(metadata__labels={"a": "2"}))  # ownership
    assert tells_anything(dep, changed(metadata__deletionTimestamp="2026-11-27T00:00:00Z"))
    assert tells_anything(dep, {**changed(), "data": {"k": "v"}})  # a field it did not have
