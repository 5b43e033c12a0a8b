"""Shoal's CLI gives an application as a TOSCA template by applying the whole document:
the manifest comes back filled, a changed template changes it, a bad one is refused naming
the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.cli.conftest import Shoal, ok
from tests.fixtures.templates import template


def document(image: str) -> dict[str, Any]:
    return {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"tosca": template(image, 2)}}  # fmt: skip


def image_of(app: dict[str, Any]) -> str:
    return str(app["spec"]["manifest"][0]["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_apply_an_application_given_as_a_template(shoal: Shoal, tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    path.write_text(yaml.safe_dump(document("nginx:1.25")))
    ok(await shoal("apply", "-f", str(path)))
    app = json.loads(ok(await shoal("get", "app", "web", "-n", "default", "-o", "json")).output)
    assert [obj["kind"] for obj in app["spec"]["manifest"]] == ["Deployment", "Service"]
    assert image_of(app) == "nginx:1.25"

    path.write_text(yaml.safe_dump(document("nginx:1.26")))
    ok(await shoal("apply", "-f", str(path)))
    app = json.loads(ok(await shoal("get", "app", "web", "-n", "default", "-o", "json")).output)
    assert image_of(app) == "nginx:1.26"

    bad = document("nginx:1")
    bad["spec"]["tosca"]["topology_template"]["node_templates"] = {}
    path.write_text(yaml.safe_dump(bad))
    refused = await shoal("apply", "-f", str(path))
    assert refused.exit_code != 0
    assert "spec.tosca.topology_template.node_templates" in refused.output
