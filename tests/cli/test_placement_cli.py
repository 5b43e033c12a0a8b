"""The multi-cluster flags of ``shoal kube app create``, ``-o wide`` and describe's shares."""

from __future__ import annotations

from pathlib import Path

from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, Cluster, ClusterSpec
from shoal.testing import builders
from tests.cli.conftest import Shoal, ok

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
"""


async def test_flags_fill_the_placement(shoal: Shoal, client: ShoalClient, tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    path.write_text(MANIFEST)
    ok(await shoal("kube", "app", "create", "web", "-f", str(path), "--clusters", "3",
                   "--spread-by", "location", "--replicas", "divided",
                   "--weights", "location is DE=2", "--weights", "location is FR=1",
                   "--fallback", "tier is primary", "--fallback", "tier is backup"))  # fmt: skip
    app = await client.get(Application, "web", "default")
    placement = app.spec.placement
    assert placement is not None
    assert (placement.clusters, placement.spread_by, placement.replicas) == (
        3, "location", "divided")  # fmt: skip
    assert [(w.clusters, w.weight) for w in placement.weights] == [  # type: ignore[union-attr]
        ("location is DE", 2), ("location is FR", 1)]  # fmt: skip
    assert placement.fallback == ["tier is primary", "tier is backup"]

    ok(await shoal("kube", "app", "update", "web", "--weights", "dynamic"))
    app = await client.get(Application, "web", "default")
    assert app.spec.placement is not None and app.spec.placement.weights == "dynamic"

    bad = await shoal("kube", "app", "update", "web", "--weights", "DE:2")
    assert bad.exit_code != 0 and "CONSTRAINT=WEIGHT" in bad.stderr
    refused = await shoal("kube", "app", "update", "web", "--replicas", "duplicated")
    assert refused.exit_code != 0 and "set replicas: divided" in refused.stderr


async def test_wide_list_and_describe_show_each_share(shoal: Shoal, client: ShoalClient) -> None:
    refs = []
    for name in ("de-1", "fr-1", "fr-2"):
        cluster = Cluster(metadata=Metadata(name=name, namespace="default"),
                          spec=ClusterSpec(kubeconfig=builders.kubeconfig(name)))  # fmt: skip
        await builders.register(client, cluster)
        refs.append({"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": name})
    app = await client.create(Application.model_validate({
        "metadata": {"name": "spread", "namespace": "default"},
        "spec": {"manifest": [builders.deployment("spread", replicas=10)],
                 "placement": {"clusters": 3, "replicas": "divided"}},
    }))  # fmt: skip
    shares = [4, 3, 3]
    why = [{"cluster": ref["name"], "replicas": n, "score": 0.5, "room": 20, "weight": 1.0,
            "group": 0} for ref, n in zip(refs, shares, strict=True)]  # fmt: skip
    await client.bind_many([{
        "namespace": "default", "name": "spread", "cluster": refs[0],
        "resource_version": app.metadata.resource_version,
        "explanation": {"summary": "3/3 clusters available", "placements": why},
        "placements": [{"cluster": r, "replicas": n} for r, n in zip(refs, shares, strict=True)],
    }])  # fmt: skip
    await client.patch_status(Application, "spread", "default", {"copies": [
        {"cluster": refs[0], "replicas": 4, "ready_replicas": 4, "state": "RUNNING"}]})

    wide = ok(await shoal("kube", "app", "list", "-o", "wide")).stdout
    assert "3 clusters (4/3/3)" in wide
    page = ok(await shoal("kube", "app", "describe", "spread")).stdout
    assert "Placements: 3 clusters (4/3/3), replicas divided, weights even" in page
    rows = {line.split()[0]: line.split()[1:5] for line in page.splitlines()
            if line.strip().startswith(("de-1 ", "fr-1 ", "fr-2 "))}  # fmt: skip
    assert rows["de-1"] == ["4", "4", "RUNNING", "0.5000"]
    assert rows["fr-1"] == ["3", "0", "PENDING", "0.5000"]  # not applied with its share yet
    explained = ok(await shoal("kube", "app", "explain", "spread")).stdout
    assert "SHARE" in explained and "ROOM" in explained
    shares_rows = [line for line in explained.splitlines() if "fr-2" in line and "│ 3" in line]
    assert shares_rows, explained


async def test_a_short_placement_is_degraded_in_describe_and_wide(
    shoal: Shoal, client: ShoalClient
) -> None:
    cluster = Cluster(metadata=Metadata(name="de-1", namespace="default"),
                      spec=ClusterSpec(kubeconfig=builders.kubeconfig("de-1")))  # fmt: skip
    await builders.register(client, cluster)
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "de-1"}
    app = await client.create(Application.model_validate({
        "metadata": {"name": "short", "namespace": "default"},
        "spec": {"manifest": [builders.deployment("short", replicas=2)],
                 "placement": {"clusters": 2, "spread_by": "regoin"}},
    }))  # fmt: skip
    message = "on 1 of 2 clusters asked for: no cluster has the spread_by label 'regoin'"
    await client.bind_many([{
        "namespace": "default", "name": "short", "cluster": ref,
        "resource_version": app.metadata.resource_version,
        "explanation": {"summary": "1/1 clusters available", "short": message, "placements": [
            {"cluster": "de-1", "replicas": None, "score": 0.0, "room": 9, "weight": 1.0,
             "group": 0}]},
        "placements": [{"cluster": ref, "replicas": None}],
    }])  # fmt: skip
    condition = {"type": "Degraded", "status": "True", "reason": "PlacementShort",
                 "message": message, "since": "2026-11-28T05:00:00Z"}  # fmt: skip
    await client.patch_status(Application, "short", "default", {
        "conditions": [condition], "deploy_state": "RUNNING",
        "copies": [{"cluster": ref, "ready_replicas": 2, "state": "RUNNING"}]})  # fmt: skip

    page = ok(await shoal("kube", "app", "describe", "short")).stdout
    assert "RUNNING, Degraded" in page
    assert f"Degraded:        {message} (since 2026-11-28T05:00:00Z" in page
    wide = ok(await shoal("get", "app", "-o", "wide")).stdout
    assert f"Degraded: {message}" in wide
    plain = ok(await shoal("get", "app")).stdout
    assert "Degraded" not in plain  # only the wide list has the column
