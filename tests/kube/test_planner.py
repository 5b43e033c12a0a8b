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


def _secret_data(objects: list[Any], name: str) -> dict[str, str]:
    import base64

    (secret,) = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == name]
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_the_copy_carries_each_hooks_token_and_the_url_of_its_application() -> None:
    app = _app({"complete_token": "tok-c", "shutdown_token": "tok-s"})
    app.spec.hooks = ["complete", "shutdown"]
    app.metadata.namespace = None  # an application without a namespace is in "default"
    complete = _secret_data(planner.desired(app, SETTINGS), "web-krake-complete-secret-token")
    assert complete == {
        "krake_complete_token": "tok-c",
        "krake_complete_url": "https://api.example:8443/kubernetes/namespaces/default/"
        "applications/web/complete",
    }
    shutdown = _secret_data(planner.desired(app, SETTINGS), "web-krake-shutdown-secret-token")
    assert shutdown["krake_shutdown_token"] == "tok-s"
    assert shutdown["krake_shutdown_url"].endswith("/namespaces/default/applications/web/shutdown")
    # a hook without its token yet is left out (the controller writes the token first)
    app.status.shutdown_token = None
    kinds = [(o["kind"], o["metadata"]["name"]) for o in planner.desired(app, SETTINGS)]
    assert ("Secret", "web-krake-shutdown-secret-token") not in kinds
    assert ("Secret", "web-krake-complete-secret-token") in kinds
    ref = _ref("de").model_dump()
    app.status.scheduled_to = _ref("de")
    (copy,) = planner.copies(app, SETTINGS, _cluster)
    assert [o["kind"] for o in copy.manifest] == ["Deployment", "Secret"]
    assert copy.app_namespace == "default" and ref["name"] == "de"


def test_an_application_bound_nowhere_has_no_copy() -> None:
    app = _app({})
    assert planner.placed(app) == [] and planner.copies(app, SETTINGS, _cluster) == []
    assert planner.leaving(app) == []


def test_one_copy_of_several_placements_is_divided_and_goes_on_from_no_record() -> None:
    applied = [builders.deployment("web", "nginx:1", replicas=6)]
    status = {"placements": [{"cluster": _ref("de").model_dump(), "replicas": 6}],
              "running_on": _ref("de").model_dump(), "last_applied_manifest": applied,
              "last_observed_manifest": applied}  # fmt: skip
    app = _app(status, {"clusters": 1, "replicas": "divided"})
    (de,) = planner.copies(app, SETTINGS, _cluster)
    # alone on its cluster, where it runs: it goes on from the status's record there
    assert de.replicas == 6 and de.prune and de.previous == applied and de.observed == applied
    two = _app({**status, "placements": [{"cluster": _ref("de").model_dump(), "replicas": 4},
                                          {"cluster": _ref("fr").model_dump(), "replicas": 2}]},
               {"clusters": 2, "replicas": "divided"})  # fmt: skip
    de, fr = planner.copies(two, SETTINGS, _cluster)
    assert (_replicas(de), _replicas(fr)) == (4, 2)  # divided, with no overrides
    for copy in (de, fr):  # several copies share no record of each
        assert copy.previous == [] and copy.observed == [] and not copy.prune and copy.own == []


def test_a_copy_the_status_lists_takes_the_recorded_objects_without_owner_as_its_own() -> None:
    applied = [builders.deployment("web", "nginx:1", replicas=6)]
    status = {"placements": [{"cluster": _ref("de").model_dump(), "replicas": 4},
                             {"cluster": _ref("fr").model_dump(), "replicas": 2}],
              "copies": [{"cluster": _ref("fr").model_dump(), "replicas": 2}],
              "last_applied_manifest": applied}  # fmt: skip
    de, fr = planner.copies(_app(status, {"clusters": 2, "replicas": "divided"}), SETTINGS,
                            _cluster)  # fmt: skip
    assert de.own == [] and fr.own == applied


def test_the_whole_manifest_goes_as_it_is_to_one_cluster_without_overrides() -> None:
    ref = _ref("it").model_dump()
    app = _app({"scheduled_to": ref})
    app.spec.conflict_resolution = "overwrite"
    app.metadata.uid = None
    (copy,) = planner.copies(app, SETTINGS, lambda r: None)  # a cluster Shoal no longer knows
    assert copy.manifest == app.spec.manifest and copy.replicas is None
    assert copy.overwrite and copy.app_uid == ""
    assert not planner.copies(_app({"scheduled_to": ref}), SETTINGS, _cluster)[0].overwrite


def test_each_copy_goes_to_the_namespace_of_its_clusters_context() -> None:
    contexts = {
        name: Cluster(
            metadata=Metadata(name=name, namespace=NS),
            spec=ClusterSpec(kubeconfig={
                "apiVersion": "v1", "kind": "Config", "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u",
                                                       "namespace": f"ns-{name}"}}],
                "clusters": [{"name": "k", "cluster": {"server": "https://k:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}]}),
        )
        for name in ("de", "fr")
    }  # fmt: skip
    status = {"placements": [{"cluster": _ref("de").model_dump(), "replicas": 4},
                             {"cluster": _ref("fr").model_dump(), "replicas": 2}]}  # fmt: skip
    app = _app(status, {"clusters": 2, "replicas": "divided"})
    de, fr = planner.copies(app, SETTINGS, lambda r: contexts.get(r.name) if r else None)
    assert (de.kube_namespace, fr.kube_namespace) == ("ns-de", "ns-fr")


def test_a_removal_is_the_owners_objects_on_one_cluster_and_nothing_else() -> None:
    from shoal.copies.owners import Owner

    objects = [builders.deployment("web", "nginx:1")]
    spec = planner.removal(Owner("team-a", "web", "u-9"), _ref("de"), objects, "prod")
    assert (spec.app_namespace, spec.app_name, spec.app_uid) == ("team-a", "web", "u-9")
    assert spec.cluster == _ref("de") and spec.kube_namespace == "prod"
    assert spec.manifest == objects and spec.replicas is None
    assert spec.overwrite is False and spec.prune is False
    assert spec.previous == spec.observed == spec.own == spec.observer_schema == []


def test_a_placement_on_a_cluster_shoal_no_longer_knows_gets_its_share_without_overrides() -> None:
    override = {"clusters": "location=DE",
                "patch": {"kind": "Deployment", "name": "web",
                          "merge": {"spec": {"paused": True}}}}  # fmt: skip
    status = {"placements": [{"cluster": _ref("de").model_dump(), "replicas": 4},
                             {"cluster": _ref("gone").model_dump(), "replicas": 2}]}  # fmt: skip
    app = _app(status, {"clusters": 2, "replicas": "divided", "overrides": [override]})
    de, gone = planner.copies(app, SETTINGS, _cluster)
    assert (_replicas(de), _replicas(gone)) == (4, 2)
    assert de.manifest[0]["spec"].get("paused") is True
    assert "paused" not in gone.manifest[0]["spec"]  # no labels: no override matches
