"""The CLI with Krake's names: namespace ``system:admin`` (rok's default), names with
dots, colons and upper case, a rule naming such a namespace."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Shoal, ok
from tests.cli.test_apps import manifest


async def test_an_application_in_namespace_system_admin(shoal: Shoal, tmp_path: Path) -> None:
    path = manifest(tmp_path)
    ok(await shoal("kube", "app", "create", "Echo_demo.v1:a", "-f", path, "-n", "system:admin"))
    listed = ok(await shoal("kube", "app", "list", "-n", "system:admin", "-o", "json")).stdout
    assert [i["metadata"]["name"] for i in json.loads(listed)["items"]] == ["Echo_demo.v1:a"]
    got = ok(await shoal("kube", "app", "get", "Echo_demo.v1:a", "-n", "system:admin",
                         "-o", "json")).stdout  # fmt: skip
    assert json.loads(got)["metadata"]["namespace"] == "system:admin"
    deleted = ok(await shoal("kube", "app", "delete", "Echo_demo.v1:a", "-n", "system:admin"))
    assert "system:admin/Echo_demo.v1:a" in deleted.stdout


async def test_a_rule_names_a_namespace_with_a_colon(shoal: Shoal) -> None:
    rule = "kubernetes:applications:system:admin,team:get,list"
    ok(await shoal("core", "role", "create", "krake-reader", "--rule", rule))
    role = json.loads(ok(await shoal("core", "role", "get", "krake-reader", "-o", "json")).stdout)
    assert role["rules"] == [{"api": "kubernetes", "resources": ["applications"],
                              "namespaces": ["system:admin", "team"], "verbs": ["get", "list"]}]
    bad = await shoal("core", "role", "create", "x", "--rule", "core:metrics")
    assert bad.exit_code == 1 and "api:resources:namespaces:verbs" in bad.stderr
