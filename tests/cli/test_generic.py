"""Generic verbs (get/list/delete/apply any kind), output formats, --watch."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import GlobalMetric, MetricProviderRef, MetricSpec
from shoal.model.kubernetes import Application
from tests.cli.conftest import Shoal, ok

OBJECTS = """\
api: core
kind: GlobalMetricsProvider
metadata: {name: static1}
spec:
  type: static
  static: {metrics: {load: 0.4}}
---
api: core
kind: GlobalMetric
metadata: {name: load}
spec: {min: 0, max: 1, provider: {name: static1, metric: load}}
---
api: kubernetes
kind: Application
metadata: {name: web}
spec:
  manifest:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
  constraints: {cluster: {metrics: ["load < 0.5"]}}
"""


def metric(name: str) -> GlobalMetric:
    spec = MetricSpec(min=0, max=1, provider=MetricProviderRef(name="p", metric=name))
    return GlobalMetric(metadata=Metadata(name=name), spec=spec)


async def test_apply_creates_then_updates(
    shoal: Shoal, client: ShoalClient, tmp_path: Path
) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(OBJECTS)
    result = ok(await shoal("apply", "-f", str(path)))
    assert result.stdout.splitlines() == [
        "GlobalMetricsProvider static1 created",
        "GlobalMetric load created",
        "Application default/web created",
    ]
    path.write_text(OBJECTS.replace("max: 1", "max: 2"))
    result = ok(await shoal("apply", "-f", str(path)))
    assert result.stdout.splitlines() == [
        "GlobalMetricsProvider static1 unchanged",
        "GlobalMetric load configured",
        "Application default/web unchanged",
    ]
    before = (await client.get(Application, "web", "default")).metadata.resource_version
    assert (await client.get(GlobalMetric, "load")).spec.max == 2
    app = await client.get(Application, "web", "default")
    assert app.spec.constraints.cluster.metrics == ["load < 0.5"]
    assert app.metadata.resource_version == before  # unchanged: not written again


async def test_apply_errors(shoal: Shoal, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("api: core\nkind: Gizmo\nmetadata: {name: x}\n")
    result = await shoal("apply", "-f", str(path))
    assert result.exit_code == 1 and "unknown kind core/Gizmo" in result.stderr
    path.write_text("api: core\nkind: GlobalMetric\nmetadata: {name: x}\nspec: {min: 0}\n")
    result = await shoal("apply", "-f", str(path))
    assert result.exit_code == 1 and "spec.max" in result.stderr


async def test_apply_reports_every_error_in_file_order(
    shoal: Shoal, client: ShoalClient, tmp_path: Path
) -> None:
    """As kubectl: the good objects are applied, every refused one is reported in the order of
    the file (local checks and the API's alike), with the nearest kinds suggested; exit 1."""
    path = tmp_path / "mixed.yaml"
    path.write_text(
        "api: kubernetes\nkind: Aplication\nmetadata: {name: a}\n---\n"
        + OBJECTS.split("---\n")[1]  # the metric, whose provider does not exist: fine
        + "---\napi: core\nkind: GlobalMetric\nmetadata: {name: y}\nspec: {min: 0}\n"
        + "---\napi: core\nkind: globalmetric\nmetadata: {name: z}\n"
    )
    result = await shoal("apply", "-f", str(path))
    assert result.exit_code == 1, result.stdout
    assert "GlobalMetric load created" in result.stdout
    assert (await client.get(GlobalMetric, "load")).spec.max == 1
    err = result.stderr
    first = err.index("document 1")
    assert "unknown kind kubernetes/Aplication; did you mean kubernetes/Application?" in err
    assert first < err.index("spec.max") < err.index("document 4")
    assert "did you mean core/GlobalMetric?" in err
    assert "3 of 4 object(s) refused" in err


def _posts(route: str) -> float:
    from shoal.api.metrics import REQUESTS

    return sum(
        sample.value
        for metric in REQUESTS.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
        and sample.labels["method"] == "POST"
        and sample.labels["route"] == route
    )


async def test_a_file_of_applications_is_created_in_one_request(
    shoal: Shoal, client: ShoalClient, tmp_path: Path
) -> None:
    """Consecutive applications go in one batch; the one the API refuses is reported with
    its document and field, and the rest are created; apply then updates one by one."""

    def app(name: str, manifest: str = "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}"):
        return f"api: kubernetes\nkind: Application\nmetadata: {{name: {name}}}\n" \
               f"spec:\n  manifest:\n  - {manifest}\n"

    refused = "{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: x}}"
    path = tmp_path / "apps.yaml"
    path.write_text("---\n".join([app("a1"), app("a2", refused), app("a3"), app("a4")]))
    batches, singles = _posts("/kubernetes/applications"), _posts(
        "/kubernetes/namespaces/{namespace}/applications"
    )
    result = await shoal("create", "-f", str(path))
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        f"Application default/{name} created" for name in ("a1", "a3", "a4")
    ]
    assert "document 2" in result.stderr and "spec.manifest[0].spec.replicas" in result.stderr
    assert _posts("/kubernetes/applications") == batches + 1
    assert _posts("/kubernetes/namespaces/{namespace}/applications") == singles
    listed = await client.list(Application, "default")
    assert sorted(a.metadata.name for a in listed.items) == ["a1", "a3", "a4"]
    # apply: the existing ones are compared (one changed), the new one created
    path.write_text("---\n".join([app("a1"), app("a3", "{apiVersion: v1, kind: Secret, "
                                                  "metadata: {name: s}}"), app("a5")]))
    result = ok(await shoal("apply", "-f", str(path)))
    assert result.stdout.splitlines() == [
        "Application default/a1 unchanged",
        "Application default/a3 configured",
        "Application default/a5 created",
    ]
    assert (await client.get(Application, "a3", "default")).spec.manifest[0]["kind"] == "Secret"


async def test_a_file_is_created_one_by_one_where_the_api_has_no_batches(
    shoal: Shoal, client: ShoalClient, tmp_path: Path, monkeypatch: Any
) -> None:
    """An API from before creates in batches answers the batch route 405: the CLI then
    sends each application alone, as it used to."""
    from shoal.client.rest import ApiError
    from shoal.client.rest import ShoalClient as Client

    async def old_api(self: Client, objects: Any, **kw: Any) -> Any:
        raise ApiError(405, {"title": "METHOD_NOT_ALLOWED", "detail": "Method Not Allowed"})

    monkeypatch.setattr(Client, "create_many", old_api)
    doc = "api: kubernetes\nkind: Application\nmetadata: {{name: {}}}\nspec:\n  manifest:\n" \
          "  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c}}}}\n"
    path = tmp_path / "apps.yaml"
    path.write_text("---\n".join(doc.format(name) for name in ("o1", "o2")))
    result = ok(await shoal("create", "-f", str(path)))
    assert result.stdout.splitlines() == [
        "Application default/o1 created",
        "Application default/o2 created",
    ]


async def test_generic_get_list_delete(shoal: Shoal, client: ShoalClient) -> None:
    await client.create(metric("a"))
    await client.create(metric("b"))
    for kind in ("gm", "globalmetrics", "GlobalMetric", "core/globalmetrics"):
        listed = json.loads(ok(await shoal("list", kind, "-o", "json")).stdout)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["a", "b"], kind
    one = yaml.safe_load(ok(await shoal("get", "gm", "a", "-o", "yaml")).stdout)
    assert one["metadata"]["name"] == "a"
    table = ok(await shoal("get", "gm")).stdout
    assert "a" in table and "MIN" in table
    deleted = json.loads(ok(await shoal("delete", "gm", "a", "-o", "json")).stdout)
    assert deleted["metadata"]["name"] == "a"
    assert (await shoal("get", "gm", "a")).exit_code == 1


async def test_unknown_kind(shoal: Shoal) -> None:
    result = await shoal("get", "gizmos")
    assert result.exit_code == 1
    assert "unknown kind 'gizmos'" in result.stderr and "applications" in result.stderr


async def test_empty_list(shoal: Shoal) -> None:
    result = ok(await shoal("list", "apps"))
    assert result.stdout == ""
    assert "No applications found" in result.stderr
    document = yaml.safe_load(ok(await shoal("list", "apps", "-o", "yaml")).stdout)
    assert document["items"] == [] and document["kind"] == "ApplicationList"


async def test_label_selector(shoal: Shoal, client: ShoalClient) -> None:
    a = metric("a")
    a.metadata.labels = {"tier": "gold"}
    await client.create(a)
    await client.create(metric("b"))
    listed = json.loads(ok(await shoal("list", "gm", "-l", "tier=gold", "-o", "json")).stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]


async def test_watch_prints_events_until_timeout(shoal: Shoal, client: ShoalClient) -> None:
    await client.create(metric("before"))
    watch = asyncio.create_task(
        shoal("core", "gm", "list", "--watch", "--watch-timeout", "3", "-o", "json")
    )
    await asyncio.sleep(1)
    created = await client.create(metric("during"))
    created.spec.max = 5
    await client.update(created)
    await client.delete(GlobalMetric, "during")
    result = ok(await watch)
    events = [json.loads(line) for line in result.stdout.splitlines()]
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert seen[0] == ("ADDED", "before")
    assert ("ADDED", "during") in seen
    assert ("MODIFIED", "during") in seen
    assert seen[-1][1] == "during"


async def test_watch_table(shoal: Shoal, client: ShoalClient) -> None:
    watch = asyncio.create_task(shoal("get", "gm", "-w", "--watch-timeout", "2"))
    await asyncio.sleep(0.5)
    await client.create(metric("m1"))
    result = ok(await watch)
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["EVENT", "NAME"]
    assert any(line.split()[:2] == ["ADDED", "m1"] for line in lines[1:])


async def test_delete_cluster_force_at_the_top_level(shoal: Shoal, client: ShoalClient) -> None:
    """``shoal delete cluster NAME --force`` as ``shoal kube cluster delete --force``: with an
    application on it and no scheduler to move it, only --force removes the cluster."""
    from shoal.client.rest import NotFound
    from shoal.model.kubernetes import Cluster
    from tests.api.samples import BY_KIND

    cluster = await client.create(Cluster.model_validate(BY_KIND["Cluster"].body("c1", "default")))
    app = await client.create(Application.model_validate(BY_KIND["Application"].body("web",
                                                                                      "default")))
    await client.bind(app, cluster.ref())
    ok(await shoal("delete", "cluster", "c1"))
    marked = await client.get(Cluster, "c1", "default")
    assert marked.metadata.deleted is not None  # waits for its applications to leave
    ok(await shoal("delete", "cluster", "c1", "--force"))
    try:
        await client.get(Cluster, "c1", "default")
        raise AssertionError("c1 still there after --force")
    except NotFound:
        pass


async def test_version_and_describe_at_the_top_level(shoal: Shoal, client: ShoalClient) -> None:
    from tests.api.samples import BY_KIND

    assert ok(await shoal("version")).stdout.startswith("shoal ")
    await client.create(Application.model_validate(BY_KIND["Application"].body("web",
                                                                                 "default")))
    top = ok(await shoal("describe", "app", "web")).stdout
    grouped = ok(await shoal("kube", "app", "describe", "web")).stdout
    assert "web" in top and top.splitlines()[:3] == grouped.splitlines()[:3]
    refused = await shoal("describe", "gm", "x")
    assert refused.exit_code != 0 and "no describe page" in refused.stderr


def test_allocatable_prints_as_quantities() -> None:
    """Node allocatable on a cluster's describe page reads as Kubernetes writes it."""
    from shoal.cli.describe import cluster_page

    summary = {"summary": True, "count": 1, "ready": 1, "allocatable": {
        "cpu": 16.0, "memory": 549755813888.0, "pods": 110.0}}  # fmt: skip
    node = {"name": "n-0", "ready": True, "allocatable": {"cpu": 1.5, "memory": 2**31,
                                                           "pods": 110.0}}  # fmt: skip
    cluster = {"metadata": {"name": "c1", "namespace": "default"}, "spec": {},
               "status": {"state": "ONLINE", "node_summary": [summary, node]}}  # fmt: skip
    page = "\n".join(cluster_page(cluster, [], None))
    assert "cpu=16,memory=512Gi,pods=110" in page, page
    assert "1500m" in page and "2Gi" in page
    assert "549755813888" not in page
