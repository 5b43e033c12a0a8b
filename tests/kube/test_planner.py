"""The planner: an application → the copy each of its clusters runs, and what leaves.

An application bound to one cluster is a placement of one copy (the whole manifest, with
what its status recorded there to go on from); one placed on several gets each cluster's
share and the overrides that match the cluster's labels, by the model's ``copy_for``.
"""

from __future__ import annotations

from typing import Any

from shoal.kube import planner
from shoal.kube.hooks import HookSettings
from shoal.model.base import Metadata, ResourceRef
from shoal.model.copies import CopySpec
from shoal.model.kubernetes import Application, Cluster, ClusterSpec
from shoal.testing import builders

NS = "team"
SETTINGS = HookSettings(endpoint="https://api.example:8443")


def _ref(name: str) -> ResourceRef:
    return ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name=name)


CLUSTERS = {
    name: Cluster(
        metadata=Metadata(name=name, namespace=NS, labels={"location": location}),
        spec=ClusterSpec(kubeconfig=None),
    )
    for name, location in (("de", "DE"), ("fr", "FR"), ("it", "IT"))
}


def _cluster(ref: ResourceRef | None) -> Cluster | None:
    return CLUSTERS.get(ref.name) if ref is not None else None


def _app(status: dict[str, Any], placement: dict[str, Any] | None = None) -> Application:
    spec = {} if placement is None else {"placement": placement}
    manifest = [builders.deployment("web", "nginx:1", replicas=6)]
    app = builders.app("web", namespace=NS, manifest=manifest, status=status, **spec)
    app.metadata.uid = "u-1"
    return app


def _replicas(copy: CopySpec) -> int:
    return int(copy.manifest[0]["spec"]["replicas"])


def test_one_cluster_is_a_placement_of_one_copy_that_goes_on_from_its_record() -> None:
    applied = [builders.deployment("web", "nginx:1", replicas=6)]
    ref = _ref("de").model_dump()
    app = _app({"scheduled_to": ref, "running_on": ref, "last_applied_manifest": applied,
                "kube_namespaces": {"de": "prod"}})  # fmt: skip
    (copy,) = planner.copies(app, SETTINGS, _cluster)
    assert copy.cluster == _ref("de") and copy.replicas is None and _replicas(copy) == 6
    assert (copy.app_namespace, copy.app_name, copy.app_uid) == (NS, "web", "u-1")
    assert copy.kube_namespace == "prod"  # as recorded for that cluster
    assert copy.prune and copy.previous == applied and copy.own == applied
    assert [s["kind"] for s in copy.observer_schema] == ["Deployment"]
    assert CopySpec.model_validate_json(copy.model_dump_json()) == copy  # carried as JSON


def test_a_new_cluster_prunes_nothing_and_adopts_nothing() -> None:
    app = _app({"scheduled_to": _ref("fr").model_dump(), "running_on": _ref("de").model_dump(),
                "last_applied_manifest": [builders.deployment("web", "nginx:1")]})  # fmt: skip
    (copy,) = planner.copies(app, SETTINGS, _cluster)
    assert copy.cluster.name == "fr" and not copy.prune and copy.own == []
    assert planner.leaving(app) == [_ref("de")]


def test_each_placement_gets_its_share_and_its_overrides() -> None:
    override = {"clusters": "location=FR",
                "patch": {"kind": "Deployment", "name": "web",
                          "merge": {"spec": {"template": {"spec": {"containers": [
                              {"name": "main", "image": "nginx:fr"}]}}}}}}  # fmt: skip
    status = {"placements": [{"cluster": _ref("de").model_dump(), "replicas": 4},
                             {"cluster": _ref("fr").model_dump(), "replicas": 2}],
              "copies": [{"cluster": _ref("it").model_dump(), "replicas": 6}]}  # fmt: skip
    app = _app(status, {"clusters": 2, "replicas": "divided", "overrides": [override]})
    de, fr = planner.copies(app, SETTINGS, _cluster)
    assert (de.cluster.name, de.replicas, _replicas(de)) == ("de", 4, 4)
    assert (fr.cluster.name, fr.replicas, _replicas(fr)) == ("fr", 2, 2)
    image = [c["image"] for c in fr.manifest[0]["spec"]["template"]["spec"]["containers"]]
    assert image == ["nginx:fr"]
    assert de.manifest[0]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    assert not de.prune and de.previous == [] and de.observed == []
    assert planner.leaving(app) == [_ref("it")]
