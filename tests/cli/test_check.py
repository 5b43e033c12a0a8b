"""``shoal create|apply -f`` on wrong files (each field on its line, with file and line),
``--dry-run=server``, and ``shoal check`` over objects stored before the rules existed."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from shoal.api.codec import encode
from shoal.api.server import ApiServer
from shoal.model.base import Metadata
from shoal.model.core import Role, RoleRule
from shoal.model.kubernetes import Cluster, ClusterSpec
from tests.api.samples import BY_KIND
from tests.api.validation_cases import CASES
from tests.cli.conftest import Shoal, ok


async def test_every_wrong_file_fails_with_its_field(shoal: Shoal, tmp_path: Path) -> None:
    wrong: dict[str, str] = {}
    for case in CASES:
        path = tmp_path / f"{case.id}.yaml"
        path.write_text(yaml.safe_dump(case.body(), sort_keys=False))
        result = await shoal("create", "-f", str(path))
        if result.exit_code != 1 or case.expected() not in result.stderr:
            wrong[case.id] = f"{result.exit_code}: {result.stderr[-300:]}"
        elif str(path) not in result.stderr or "Traceback" in result.output:
            wrong[case.id] = f"no file named: {result.stderr[-300:]}"
    assert wrong == {}


async def test_error_lines_name_file_and_line(shoal: Shoal, tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    body = BY_KIND["Application"].body("web", "default")
    body["spec"]["manifest"][0]["spec"]["replicas"] = "three"
    body["spec"]["manifest"][0]["spec"]["template"] = [None]
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    lines = path.read_text().splitlines()
    replicas = next(i for i, line in enumerate(lines, 1) if "replicas:" in line)
    template = next(i for i, line in enumerate(lines, 1) if "template:" in line)
    result = await shoal("apply", "-f", str(path))
    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert errors[0].startswith("INVALID_RESOURCE: Application 'web' (")
    assert f"  {path}:{replicas}: spec.manifest[0].spec.replicas: expected integer" in errors
    assert f"  {path}:{template}: spec.manifest[0].spec.template: expected object" in errors


async def test_dry_run_checks_and_stores_nothing(shoal: Shoal, tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(BY_KIND["Cluster"].body("c1", "default")))
    result = ok(await shoal("create", "-f", str(path), "--dry-run=server"))
    assert "Cluster default/c1 created (server dry run)" in result.stdout
    listed = json.loads(ok(await shoal("kube", "cluster", "list", "-o", "json")).stdout)
    assert listed["items"] == []
    ok(await shoal("apply", "-f", str(path)))
    changed = BY_KIND["Cluster"].body("c1", "default")
    changed["spec"]["kubeconfig"]["clusters"][0]["cluster"]["server"] = "https://other:6443"
    path.write_text(yaml.safe_dump(changed))
    result = ok(await shoal("apply", "-f", str(path), "--dry-run=server", "-o", "json"))
    assert "https://other:6443" in result.stdout
    stored = json.loads(ok(await shoal("kube", "cluster", "get", "c1", "-o", "json")).stdout)
    assert stored["spec"]["kubeconfig"]["clusters"][0]["cluster"]["server"] != "https://other:6443"


async def test_check_lists_stored_objects_the_rules_refuse(api: ApiServer, shoal: Shoal) -> None:
    old_cluster = Cluster(metadata=Metadata(name="old", namespace="default"), spec=ClusterSpec())
    old_role = Role(metadata=Metadata(name="any"), rules=[RoleRule(api="", verbs=[""])])
    for obj in (old_cluster, old_role):
        obj.metadata.uid = "0"
        await api.store.create(obj.store_key(), encode(obj))  # stored before the rules
    ok(await shoal("kube", "cluster", "get", "old"))
    result = await shoal("check")
    assert result.exit_code == 1, result.output
    assert "Cluster" in result.stdout and "default/old" in result.stdout
    assert "spec.kubeconfig" in result.stdout and "rules[0].api" in result.stdout
    assert "2 refused" in result.stdout
    ok(await shoal("core", "role", "delete", "any"))
    ok(await shoal("kube", "cluster", "delete", "old"))
    assert "accepts every one" in ok(await shoal("check")).stdout
