"""shoal kube app -O: an observer schema from a file, as rok takes it; a bad one named."""

from __future__ import annotations

from pathlib import Path

from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from tests.cli.conftest import Shoal, ok
from tests.cli.test_apps import MANIFEST

SCHEMA = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: null
  template:
    spec:
      containers:
      - name: null
      - observer_schema_list_min_length: 1
        observer_schema_list_max_length: 1
"""


async def test_create_and_update_with_an_observer_schema(
    shoal: Shoal, client: ShoalClient, tmp_path: Path
) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    (tmp_path / "o.yaml").write_text(SCHEMA)
    ok(await shoal("kube", "app", "create", "web", "-f", str(tmp_path / "m.yaml"),
                   "-O", str(tmp_path / "o.yaml")))  # fmt: skip
    stored = await client.get(Application, "web", "default")
    containers = stored.spec.observer_schema[0]["spec"]["template"]["spec"]["containers"]
    assert stored.spec.observer_schema[0]["spec"]["replicas"] is None
    assert containers[0] == {"name": None}

    (tmp_path / "bad.yaml").write_text(SCHEMA.replace("replicas: null", "replicas: 2"))
    result = await shoal("kube", "app", "update", "web", "--observer-schema",
                         str(tmp_path / "bad.yaml"))  # fmt: skip
    assert result.exit_code != 0
    assert "spec.observer_schema[0].spec.replicas" in result.output
    assert "must be null" in result.output
    stored = await client.get(Application, "web", "default")
    assert stored.spec.observer_schema[0]["spec"]["replicas"] is None
