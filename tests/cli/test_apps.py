"""shoal kube app: create/list/get/update/delete with every constraint flag."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from tests.cli.conftest import Shoal, ok

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports: [{port: 80}]
"""

ONE_DOC = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data: {a: b}
"""


def manifest(tmp_path: Path, text: str = MANIFEST, name: str = "m.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


async def test_app_lifecycle(shoal: Shoal, client: ShoalClient, tmp_path: Path) -> None:
    result = ok(
        await shoal(
            "kube",
            "app",
            "create",
            "web",
            "-f",
            manifest(tmp_path),
            "-L",
            "location is DE",
            "-L",
            "tier in (gold, silver)",
            "-M",
            "load < 3",
            "-M",
            "price >= 0.5",
            "-R",
            "crontabs.stable.example.com",
            "--disable-migration",
            "--backoff",
            "2",
            "--backoff-delay",
            "3",
            "--backoff-limit",
            "4",
            "-l",
            "team=a",
            "-o",
            "json",
        )
    )
    created = json.loads(result.stdout)
    assert created["metadata"]["name"] == "web"
    assert created["metadata"]["namespace"] == "default"
    assert created["metadata"]["labels"] == {"team": "a"}
    spec = created["spec"]
    assert [m["kind"] for m in spec["manifest"]] == ["Deployment", "Service"]
    assert spec["constraints"]["migration"] is False
    assert spec["constraints"]["cluster"]["labels"] == ["location is DE", "tier in (gold, silver)"]
    assert spec["constraints"]["cluster"]["metrics"] == ["load < 3", "price >= 0.5"]
    assert spec["constraints"]["cluster"]["custom_resources"] == ["crontabs.stable.example.com"]
    assert (spec["backoff"], spec["backoff_delay"], spec["backoff_limit"]) == (2, 3, 4)

    stored = await client.get(Application, "web", "default")
    assert stored.spec.constraints.cluster.labels == ["location is DE", "tier in (gold, silver)"]

    table = ok(await shoal("kube", "app", "list")).stdout
    header = table.splitlines()[0].split()
    assert header == ["NAMESPACE", "NAME", "STATE", "SCHEDULED_TO", "RUNNING_ON", "REASON", "AGE"]
    row = table.splitlines()[1].split()
    assert row[:3] == ["default", "web", "PENDING"]

    got = yaml.safe_load(ok(await shoal("kube", "app", "get", "web", "-o", "yaml")).stdout)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    assert got["spec"] == created["spec"]

    result = ok(
        await shoal(
            "kube",
            "app",
            "update",
            "web",
            "-f",
            manifest(tmp_path, ONE_DOC, "one.yaml"),
            "--enable-migration",
            "-L",
            "location is FR",
            "-l",
            "team-",
            "-l",
            "env=prod",
            "--backoff-limit",
            "-1",
            "-o",
            "json",
        )
    )
    updated = json.loads(result.stdout)
    assert updated["metadata"]["resource_version"] > created["metadata"]["resource_version"]
    assert updated["metadata"]["labels"] == {"env": "prod"}
    assert [m["kind"] for m in updated["spec"]["manifest"]] == ["ConfigMap"]
    assert updated["spec"]["constraints"]["migration"] is True
    assert updated["spec"]["constraints"]["cluster"]["labels"] == ["location is FR"]
    # flags not given keep their values
    assert updated["spec"]["constraints"]["cluster"]["metrics"] == ["load < 3", "price >= 0.5"]
    assert updated["spec"]["backoff"] == 2
    assert updated["spec"]["backoff_limit"] == -1

    result = ok(await shoal("kube", "app", "delete", "web"))
    assert "Application default/web deleted" in result.stdout
    gone = await shoal("kube", "app", "get", "web", "-o", "json")
    # without finalizers the object goes at once; with them it is marked deleted
    assert gone.exit_code == 1 or json.loads(gone.stdout)["metadata"]["deleted"]


async def test_app_in_namespace_and_all_namespaces(shoal: Shoal, tmp_path: Path) -> None:
    path = manifest(tmp_path)
    ok(await shoal("kube", "app", "create", "a", "-f", path, "-n", "team-a"))
    ok(await shoal("kube", "app", "create", "b", "-f", path))
    only_a = ok(await shoal("kube", "app", "list", "-n", "team-a", "-o", "json")).stdout
    assert [i["metadata"]["name"] for i in json.loads(only_a)["items"]] == ["a"]
    every = json.loads(ok(await shoal("kube", "app", "list", "-A", "-o", "json")).stdout)
    assert every["kind"] == "ApplicationList"
    assert sorted(i["metadata"]["name"] for i in every["items"]) == ["a", "b"]
    assert isinstance(every["metadata"]["resource_version"], int)


async def test_manifest_from_stdin(shoal: Shoal) -> None:
    result = ok(await shoal("kube", "app", "create", "s", "-f", "-", "-o", "json", input=MANIFEST))
    assert len(json.loads(result.stdout)["spec"]["manifest"]) == 2


async def test_invalid_label_constraint_names_the_field(shoal: Shoal, tmp_path: Path) -> None:
    result = await shoal(
        "kube", "app", "create", "bad", "-f", manifest(tmp_path), "-L", "location iz DE"
    )
    assert result.exit_code == 1
    assert "spec.constraints.cluster.labels[0]" in result.stderr
    assert "iz" in result.stderr
    assert "Traceback" not in result.output


async def test_invalid_metric_constraint_on_update(shoal: Shoal, tmp_path: Path) -> None:
    ok(await shoal("kube", "app", "create", "web", "-f", manifest(tmp_path)))
    result = await shoal("kube", "app", "update", "web", "-M", "load <<< 3")
    assert result.exit_code == 1
    assert "spec.constraints.cluster.metrics[0]" in result.stderr


async def test_bad_manifest(shoal: Shoal, tmp_path: Path) -> None:
    result = await shoal(
        "kube", "app", "create", "x", "-f", manifest(tmp_path, "kind: Pod\nmetadata: {name: p}\n")
    )
    assert result.exit_code == 1
    assert "spec.manifest" in result.stderr and "apiVersion" in result.stderr
    missing = await shoal("kube", "app", "create", "x", "-f", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 1
    assert "cannot read" in missing.stderr
    broken = await shoal("kube", "app", "create", "x", "-f", manifest(tmp_path, "a: [", "b.yaml"))
    assert broken.exit_code == 1
    assert "not valid YAML" in broken.stderr


async def test_not_found(shoal: Shoal) -> None:
    result = await shoal("kube", "app", "get", "nope")
    assert result.exit_code == 1
    assert "not found" in result.stderr and "'nope'" in result.stderr
    assert "Traceback" not in result.output
    result = await shoal("kube", "app", "update", "nope", "--backoff", "1")
    assert result.exit_code == 1
    assert "not found" in result.stderr


async def test_create_twice_conflicts(shoal: Shoal, tmp_path: Path) -> None:
    path = manifest(tmp_path)
    ok(await shoal("kube", "app", "create", "web", "-f", path))
    result = await shoal("kube", "app", "create", "web", "-f", path)
    assert result.exit_code == 1
    assert "RESOURCE_ALREADY_EXISTS" in result.stderr


async def test_migration_flags_exclude_each_other(shoal: Shoal) -> None:
    result = await shoal("kube", "app", "update", "x", "--enable-migration", "--disable-migration")
    assert result.exit_code == 1
    assert "exclude" in result.stderr
