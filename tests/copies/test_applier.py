"""The Applier runs a copy on one member cluster from a CopySpec alone: no Shoal API.

Each test talks to a real ``shoal sim`` cluster and reads back, through the cluster's own
API, what the applier left there; none starts a Shoal API, so what the applier does it
does with the member cluster's credentials only (what a member cluster's agent will do).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeClients, KubeCluster
from shoal.copies.applier import Applier
from shoal.copies.member import KubeFailure, Members
from shoal.copies.owners import Owner, owner_of
from shoal.model.base import Metadata, ReasonCode, ResourceRef
from shoal.model.copies import CopySpec
from shoal.model.kubernetes import ApplicationState, Cluster, ClusterSpec
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.wait import wait_for

pytestmark = pytest.mark.integration

NS = "default"
EDGE = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="edge")


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """One cluster, the applier's."""
    return dict(clusters=["edge"], nodes=2, pod_start_delay=0.1)


@pytest.fixture
async def kube(sim: SimServer) -> AsyncIterator[KubeCluster]:
    clients = KubeClients(timeout=2.0)
    cluster = Cluster(
        metadata=Metadata(name="edge", namespace=NS),
        spec=ClusterSpec(kubeconfig=sim.clusters.kubeconfig("edge")),
    )
    try:
        yield await clients.get(cluster)
    finally:
        await clients.close()


@pytest.fixture
def existing() -> set[str]:
    """The uids of the applications that exist (what Shoal's store would say)."""
    return set()


@pytest.fixture
def applier(kube: KubeCluster, existing: set[str]) -> Applier:
    return Applier(kube, EDGE, Members(None, lambda owner: owner.uid in existing))


def spec(name: str, uid: str, replicas: int = 2, **fields: Any) -> CopySpec:
    """A copy as the planner gives it, carried as JSON (as it would reach an agent)."""
    made = CopySpec(
        app_namespace=NS,
        app_name=name,
        app_uid=uid,
        cluster=EDGE,
        kube_namespace=NS,
        manifest=[builders.deployment(name, "nginx:1", replicas=replicas)],
        replicas=replicas,
        **fields,
    )
    return CopySpec.model_validate_json(made.model_dump_json())


async def _live(kube: KubeCluster, name: str) -> dict[str, Any] | None:
    return await kube.read(builders.deployment(name, "nginx:1"), NS)


async def _ready(applier: Applier, copy: CopySpec) -> Any:
    report = await applier.apply(copy, ReasonCode.CREATE_FAILED)
    return report if report.ready else None


async def test_a_copy_is_applied_reported_and_then_only_read(
    applier: Applier, kube: KubeCluster
) -> None:
    copy = spec("web", "uid-web", replicas=2)
    first = await applier.apply(copy, ReasonCode.CREATE_FAILED)
    assert first.applied and first.cluster == EDGE and first.replicas == 2
    live = await _live(kube, "web")
    assert live is not None and owner_of(live) == Owner(NS, "web", "uid-web")
    assert live["spec"]["replicas"] == 2

    report = await wait_for(lambda: _ready(applier, copy), timeout=20, message="web ready")
    assert not report.applied  # unchanged: read, not applied again
    assert report.state is ApplicationState.RUNNING and report.ready_replicas == 2
    assert report.health.running_pods == 2
    assert [o["kind"] for o in report.last_applied_manifest] == ["Deployment"]


async def test_drift_is_repaired_and_reported(applier: Applier, kube: KubeCluster) -> None:
    copy = spec("api", "uid-api", replicas=1)
    await applier.apply(copy, ReasonCode.CREATE_FAILED)
    await kube.delete(builders.deployment("api", "nginx:1"), NS)
    assert await _live(kube, "api") is None

    report = await applier.apply(copy, ReasonCode.RECONCILE_FAILED)
    assert report.applied and report.drifted == ["Deployment api"]
    assert await _live(kube, "api") is not None


async def test_another_applications_object_is_refused(applier: Applier, existing: set[str]) -> None:
    existing.update({"uid-first", "uid-second"})
    await applier.apply(spec("db", "uid-first", replicas=1), ReasonCode.CREATE_FAILED)
    with pytest.raises(KubeFailure) as refused:
        await applier.apply(spec("db", "uid-second", replicas=1), ReasonCode.CREATE_FAILED)
    assert refused.value.code is ReasonCode.CONFLICT
    assert "uid-first" in str(refused.value) and "edge" in str(refused.value)


async def test_remove_and_prune_touch_only_what_they_must(
    applier: Applier, kube: KubeCluster, existing: set[str]
) -> None:
    existing.update({"uid-kept", "uid-gone"})
    kept, gone = spec("kept", "uid-kept", replicas=1), spec("gone", "uid-gone", replicas=1)
    for copy in (kept, gone):
        await applier.apply(copy, ReasonCode.CREATE_FAILED)

    pruned = await applier.prune({("apps/v1", "Deployment")}, lambda o: o.uid == "uid-kept")
    assert pruned == 1
    assert await _live(kube, "gone") is None and await _live(kube, "kept") is not None

    assert await applier.remove(kept) == 1
    assert await _live(kube, "kept") is None
    assert await applier.remove(kept) == 0  # nothing left: done


async def test_a_prune_deletes_only_the_object_it_listed(
    applier: Applier, kube: KubeCluster, sim: SimServer
) -> None:
    """Made again under the same name between the prune's list and its delete (its
    application came back and was applied there meanwhile): not the object the prune
    decided on, so it stays."""
    await applier.apply(spec("back", "uid-back", replicas=1), ReasonCode.CREATE_FAILED)
    listed = await _live(kube, "back")
    assert listed is not None
    edge = sim.clusters.cluster("edge")
    deployments = edge.registry.get("apps", "v1", "deployments")
    assert deployments is not None

    def made_again(owner: Owner) -> bool:
        edge.api.delete(deployments, NS, "back")
        edge.api.create(deployments, {k: v for k, v in listed.items() if k != "status"}, NS)
        return False  # decided on the object listed: its application did not use edge

    assert await applier.prune({("apps/v1", "Deployment")}, made_again) == 0
    live = await _live(kube, "back")
    assert live is not None and live["metadata"]["uid"] != listed["metadata"]["uid"]
    assert owner_of(live) == Owner(NS, "back", "uid-back")


SERVICE_ADDRESSES: list[tuple[str, dict[str, Any] | None, str, str | None]] = [
    ("no Service", None, "https://k.example:6443", None),
    ("a node port on the cluster's host",
     {"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}},
     "https://k.example:6443", "k.example:30080"),
    ("the first port's node port",
     {"spec": {"type": "NodePort", "ports": [{"nodePort": 30001}, {"nodePort": 30002}]}},
     "https://10.0.0.1:6443/prefix", "10.0.0.1:30001"),
    ("a load balancer's ip and port",
     {"spec": {"type": "LoadBalancer", "ports": [{"port": 8080, "nodePort": 31000}]},
      "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}, {"ip": "192.0.2.8"}]}}},
     "https://k.example:6443", "192.0.2.7:8080"),
    ("a load balancer's host name",
     {"spec": {"type": "LoadBalancer", "ports": [{"port": 443}]},
      "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}}},
     "https://k.example:6443", "lb.example:443"),
    ("a load balancer not given an address yet: its node port",
     {"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30500}]},
      "status": {"loadBalancer": {}}},
     "https://k.example:6443", "k.example:30500"),
    ("a load balancer port without a number: its node port",
     {"spec": {"type": "LoadBalancer", "ports": [{"nodePort": 30600}]},
      "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}},
     "https://k.example:6443", "k.example:30600"),
    ("a ClusterIP Service", {"spec": {"type": "ClusterIP", "ports": [{"port": 80}]}},
     "https://k.example:6443", None),
    ("no ports", {"spec": {}}, "https://k.example:6443", None),
    ("no spec", {"kind": "Service"}, "https://k.example:6443", None),
    ("a cluster URL without a host", {"spec": {"ports": [{"nodePort": 30080}]}}, "/local", None),
]  # fmt: skip


@pytest.mark.parametrize(("service", "url", "expected"), [r[1:] for r in SERVICE_ADDRESSES],
                         ids=[r[0] for r in SERVICE_ADDRESSES])  # fmt: skip
def test_where_a_workload_is_reached_from_outside(
    service: dict[str, Any] | None, url: str, expected: str | None
) -> None:
    from shoal.copies.applier import service_address

    assert service_address(service, url) == expected


def _service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "NodePort", "selector": {"app": name},
                     "ports": [{"port": 80, "targetPort": 80, "nodePort": 30123}]}}  # fmt: skip


def _config(name: str, labels: dict[str, str] | None = None, ns: str = NS) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


async def test_the_report_names_each_services_address_and_the_workloads_pods(
    applier: Applier, kube: KubeCluster
) -> None:
    copy = spec("shop", "uid-shop", replicas=2)
    copy.manifest = [_config("shop-config"), _service("shop"), *copy.manifest]
    first = await applier.apply(copy, ReasonCode.CREATE_FAILED)
    assert first.drifted == [] and first.taken == [] and first.reason is None
    host = str(kube.api.configuration.host).split("//")[1].split(":")[0]
    assert first.services == {"shop": f"{host}:30123"}

    report = await wait_for(lambda: _ready(applier, copy), timeout=20, message="shop ready")
    assert not report.applied and report.state is ApplicationState.RUNNING
    # the workload's pods, not the ConfigMap or Service listed before it
    assert report.ready_replicas == 2 and report.replicas == 2
    assert report.services == {"shop": f"{host}:30123"}
    assert report.drifted == [] and report.taken == []
    assert [o["kind"] for o in report.last_observed_manifest] == [
        "ConfigMap", "Service", "Deployment"]  # fmt: skip
    assert await applier.shutdown_address(copy) == f"{host}:30123"


async def test_a_copy_not_ready_yet_is_reported_without_a_state(applier: Applier) -> None:
    copy = spec("slow", "uid-slow", replicas=3)
    report = await applier.apply(copy, ReasonCode.CREATE_FAILED)
    assert report.applied and report.state is None and not report.ready
    assert report.ready_replicas < 3 and report.services == {}


async def test_a_copy_removed_whole_is_applied_again_not_only_read(
    applier: Applier, kube: KubeCluster
) -> None:
    copy = spec("again", "uid-again", replicas=1)
    await applier.apply(copy, ReasonCode.CREATE_FAILED)
    assert not (await applier.apply(copy, ReasonCode.RECONCILE_FAILED)).applied
    assert await applier.remove(copy) == 1  # whole by default: its record goes too
    assert (await applier.apply(copy, ReasonCode.CREATE_FAILED)).applied
    assert await _live(kube, "again") is not None
    applier.forget("uid-other")  # another's record: this copy's stays
    assert not (await applier.apply(copy, ReasonCode.RECONCILE_FAILED)).applied
    applier.forget("uid-again")
    assert (await applier.apply(copy, ReasonCode.RECONCILE_FAILED)).applied
    # only what the manifest no longer has: the copy's record is kept
    assert await applier.remove(copy, whole=False) == 1
    assert await _live(kube, "again") is None


async def test_a_prune_of_several_kinds_removes_every_object_of_gone_applications(
    applier: Applier, kube: KubeCluster, existing: set[str]
) -> None:
    """Every kind asked for, in every namespace, even after a kind the cluster does not
    serve; objects without an owner, of a kept application, or of another namespace's
    application are left."""
    gone = Owner(NS, "gone", "uid-gone").labels
    await kube.ensure_namespace("other")
    objects = [
        _config("gone-1", gone), _config("gone-2", gone), _config("gone-3", gone, ns="other"),
        _config("kept", Owner(NS, "kept", "uid-kept").labels),
        _config("theirs", Owner("team-b", "x", "uid-b").labels),
        _config("by-hand", {"app": "x"}),
    ]  # fmt: skip
    for obj in objects:
        await kube.request("POST", f"/api/v1/namespaces/{obj['metadata']['namespace']}/configmaps",
                           body=obj)  # fmt: skip
    await applier.apply(spec("web", "uid-gone-web", replicas=1), ReasonCode.CREATE_FAILED)
    kinds = {("example.com/v1", "Unknown"), ("v1", "ConfigMap"), ("apps/v1", "Deployment")}
    pruned = await applier.prune(kinds, lambda o: o.uid == "uid-kept")
    assert pruned == 4  # three ConfigMaps and the Deployment of applications not kept
    for name, ns in (("gone-1", NS), ("gone-2", NS), ("gone-3", "other")):
        assert await kube.read(_config(name, ns=ns), ns) is None, name
    for name in ("kept", "theirs", "by-hand"):
        assert await kube.read(_config(name), NS) is not None, name
    assert await _live(kube, "web") is None


async def test_after_a_restart_a_copy_goes_on_from_its_record_when_the_cluster_matches(
    applier: Applier, kube: KubeCluster, existing: set[str]
) -> None:
    copy = spec("kept-on", "uid-kept-on", replicas=1)
    ready = await wait_for(lambda: _ready(applier, copy), timeout=20, message="kept-on ready")
    recorded = spec("kept-on", "uid-kept-on", replicas=1,
                    previous=ready.last_applied_manifest,
                    observed=ready.last_observed_manifest)  # fmt: skip
    restarted = Applier(kube, EDGE, Members(None, lambda owner: owner.uid in existing))
    report = await restarted.apply(recorded, ReasonCode.RECONCILE_FAILED)
    assert not report.applied and report.ready  # read only: it matches the record
    assert not (await restarted.apply(recorded, ReasonCode.RECONCILE_FAILED)).applied
    # without a record of its observation, or with a record the cluster no longer matches,
    # it is applied again
    fresh = Applier(kube, EDGE, Members(None, lambda owner: owner.uid in existing))
    unrecorded = spec("kept-on", "uid-kept-on", replicas=1, previous=ready.last_applied_manifest)
    assert (await fresh.apply(unrecorded, ReasonCode.RECONCILE_FAILED)).applied
    await kube.delete(builders.deployment("kept-on", "nginx:1"), NS)
    again = Applier(kube, EDGE, Members(None, lambda owner: owner.uid in existing))
    assert (await again.apply(recorded, ReasonCode.RECONCILE_FAILED)).applied
    assert await _live(kube, "kept-on") is not None


async def test_the_shutdown_address_is_the_service_named_shutdown_else_the_first(
    applier: Applier, kube: KubeCluster
) -> None:
    from shoal.copies.applier import NoAddress

    host = str(kube.api.configuration.host).split("//")[1].split(":")[0]
    front, down = _service("front"), _service("shutdown")
    down["spec"]["ports"][0]["nodePort"] = 30124
    copy = spec("hooked", "uid-hooked", replicas=1)
    copy.kube_namespace = "shop"  # objects without a namespace go there, and are read there
    copy.manifest = [*copy.manifest, front, down]
    await applier.apply(copy, ReasonCode.CREATE_FAILED)
    assert await applier.shutdown_address(copy) == f"{host}:30124"
    copy.manifest = [copy.manifest[0], front]
    assert await applier.shutdown_address(copy) == f"{host}:30123"
    copy.manifest = [copy.manifest[0]]
    with pytest.raises(NoAddress, match=r"^its manifest has no Service$"):
        await applier.shutdown_address(copy)
    inside = {**_service("inside"), "spec": {"type": "ClusterIP", "ports": [{"port": 80}]}}
    copy.manifest = [inside]
    await applier.apply(copy, ReasonCode.CREATE_FAILED)
    with pytest.raises(NoAddress, match=r"^its Service has no node port or load balancer address$"):
        await applier.shutdown_address(copy)


async def test_what_the_manifest_no_longer_has_is_pruned_only_when_asked(
    applier: Applier, kube: KubeCluster
) -> None:
    copy = spec("trim", "uid-trim", replicas=1)
    copy.kube_namespace = "shop"
    copy.manifest = [*copy.manifest, _config("trim-config", ns="shop")]
    first = await applier.apply(copy, ReasonCode.CREATE_FAILED)
    smaller = spec("trim", "uid-trim", replicas=1, previous=first.last_applied_manifest)
    smaller.kube_namespace = "shop"
    await applier.apply(smaller, ReasonCode.RECONCILE_FAILED)  # prune not asked: kept
    assert await kube.read(_config("trim-config", ns="shop"), "shop") is not None
    smaller.prune = True
    smaller.manifest = [builders.deployment("trim", "nginx:2", replicas=1)]  # changed: applied
    report = await applier.apply(smaller, ReasonCode.RECONCILE_FAILED)
    assert report.applied
    assert await kube.read(_config("trim-config", ns="shop"), "shop") is None
    assert await kube.read(builders.deployment("trim", "nginx:1"), "shop") is not None


async def test_an_unreachable_cluster_and_a_refused_apply_fail_with_their_codes(
    applier: Applier, sim: SimServer
) -> None:
    bad = spec("bad", "uid-bad", replicas=1)
    bad.manifest = [{"apiVersion": "example.com/v1", "kind": "Nothing", "metadata": {"name": "x"}}]
    with pytest.raises(KubeFailure) as refused:
        await applier.apply(bad, ReasonCode.CREATE_FAILED)
    assert refused.value.code is ReasonCode.CREATE_FAILED
    copy = spec("far", "uid-far", replicas=1)
    await applier.apply(copy, ReasonCode.CREATE_FAILED)
    sim.clusters.set_unreachable("edge")
    try:
        for code in (ReasonCode.CREATE_FAILED, ReasonCode.RECONCILE_FAILED):
            with pytest.raises(KubeFailure) as failed:
                await applier.apply(copy, code)
            assert failed.value.code is ReasonCode.CLUSTER_NOT_REACHABLE
    finally:
        sim.clusters.set_unreachable("edge", False)


async def test_a_takeover_is_reported_and_drift_repairs_counted(
    applier: Applier, kube: KubeCluster, existing: set[str]
) -> None:
    existing.update({"uid-one", "uid-two"})
    await applier.apply(spec("db", "uid-one", replicas=1), ReasonCode.CREATE_FAILED)
    report = await applier.apply(spec("db", "uid-two", replicas=1, overwrite=True),
                                 ReasonCode.CREATE_FAILED)  # fmt: skip
    assert [(t.what, t.owner) for t in report.taken] == [("Deployment db", "db")]
    live = await _live(kube, "db")
    assert live is not None and owner_of(live) == Owner(NS, "db", "uid-two")
    before = applier.drift_repairs
    await kube.delete(builders.deployment("db", "nginx:1"), NS)
    await applier.apply(spec("db", "uid-two", replicas=1, overwrite=True), ReasonCode.CREATE_FAILED)
    assert applier.drift_repairs == before + 1


async def test_an_object_without_owner_is_adopted_when_its_status_recorded_it(
    applier: Applier, kube: KubeCluster
) -> None:
    await kube.request("POST", f"/apis/apps/v1/namespaces/{NS}/deployments",
                       body=builders.deployment("old", "nginx:1", replicas=1))  # fmt: skip
    with pytest.raises(KubeFailure) as refused:
        await applier.apply(spec("old", "uid-old", replicas=1), ReasonCode.CREATE_FAILED)
    assert refused.value.code is ReasonCode.CONFLICT
    recorded = spec("old", "uid-old", replicas=1, own=[builders.deployment("old", "nginx:1")])
    assert (await applier.apply(recorded, ReasonCode.CREATE_FAILED)).applied
    live = await _live(kube, "old")
    assert live is not None and owner_of(live) == Owner(NS, "old", "uid-old")
