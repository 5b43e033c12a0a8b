"""The clusters an application is placed on and runs on: each once, in order, whether it
names it as its cluster, as a placement's or as a copy's."""

from __future__ import annotations

from shoal.model.application_status import placed_on, runs_on
from shoal.model.base import ResourceRef
from shoal.model.kubernetes import ApplicationStatus, CopyStatus, PlacementStatus


def cluster(name: str, namespace: str = "default") -> ResourceRef:
    return ResourceRef(api="kubernetes", kind="Cluster", namespace=namespace, name=name)


def test_placed_on_names_each_cluster_once_in_order() -> None:
    status = ApplicationStatus(
        scheduled_to=cluster("b"),
        placements=[PlacementStatus(cluster=cluster(n)) for n in ("a", "b", "c", "a")],
    )
    assert [r.name for r in placed_on(status)] == ["b", "a", "c"]


def test_runs_on_tells_clusters_of_other_namespaces_apart() -> None:
    status = ApplicationStatus(
        running_on=None,
        copies=[CopyStatus(cluster=cluster("a")), CopyStatus(cluster=cluster("a", "other")),
                CopyStatus(cluster=cluster("a"))],
    )  # fmt: skip
    assert [(r.namespace, r.name) for r in runs_on(status)] == [("default", "a"), ("other", "a")]


def test_a_hundred_clusters_each_once() -> None:
    refs = [cluster(f"c-{i}") for i in range(100)]
    status = ApplicationStatus(
        running_on=refs[0], copies=[CopyStatus(cluster=r) for r in refs + refs]
    )
    assert runs_on(status) == refs
