"""An observer schema on an application placed on several clusters: each copy follows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.model import observer_schema as rules
from shoal.model.kubernetes import Application, ApplicationState
from shoal.sim.server import SimServer
from tests.conftest import ControlPlane
from tests.multicluster.conftest import NS, replicas_on, spread_app
from tests.util import kubectl, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DUPLICATED = {"clusters": 2, "spread_by": "location", "replicas": "duplicated"}

# replicas observed, the image not; ports may come and go (no maximum)
SCHEMA: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": None,
        "template": {"spec": {"containers": [
            {"name": None, "ports": [{rules.MIN_LENGTH: 0, rules.MAX_LENGTH: 0}]},
            {rules.MIN_LENGTH: 1, rules.MAX_LENGTH: 1},
        ]}},
    },
}  # fmt: skip


async def _kubectl(sim: SimServer, tmp_path: Path, cluster: str, *args: str) -> None:
    config = tmp_path / f"{cluster}.yaml"
    config.write_text(yaml.safe_dump(sim.kubeconfig(cluster)))
    await kubectl(config, "-n", NS, *args)


def _container_patch(**fields: Any) -> str:
    container = {"name": "main", **fields}
    return json.dumps({"spec": {"template": {"spec": {"containers": [container]}}}})


async def _image(kube: KubeCluster) -> str:
    live = await kube.read(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}, NS
    )
    assert live is not None
    return str(live["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_each_copy_keeps_its_observed_fields_only(
    client: ShoalClient, kube: dict[str, KubeCluster], control_plane: ControlPlane,
    sim: SimServer, tmp_path: Path,
) -> None:  # fmt: skip
    await client.create(spread_app("web", 2, DUPLICATED, observer_schema=[SCHEMA]))

    async def running() -> Application | None:
        app = await client.get(Application, "web", NS)
        return app if app.status.state is ApplicationState.RUNNING else None

    app = await wait_for(running, timeout=20, message="web RUNNING on two clusters")
    first, second = (p.cluster.name for p in app.status.placements)
    assert app.status.last_observed_manifest[0]["spec"]["replicas"] == 2

    # on the first copy: the image (not observed) changes, then a port is added (an
    # observed list within its range), which the first copy's observation reports
    await _kubectl(sim, tmp_path, first, "patch", "deployment", "web", "--patch",
                   _container_patch(image="nginx:2"))  # fmt: skip
    await _kubectl(sim, tmp_path, first, "patch", "deployment", "web", "--patch",
                   _container_patch(ports=[{"containerPort": 80}]))  # fmt: skip

    async def port_seen() -> bool:
        app = await client.get(Application, "web", NS)
        if not app.status.last_observed_manifest:
            return False
        container = app.status.last_observed_manifest[0]["spec"]["template"]["spec"]["containers"]
        return bool(container[0]["ports"][-1] == {rules.CURRENT_LENGTH: 1})

    await wait_for(port_seen, timeout=20, message="the added port in last_observed_manifest")
    assert await _image(kube[first]) == "nginx:2"

    # on the second copy: replicas (observed) scaled by hand are put back
    await _kubectl(sim, tmp_path, second, "scale", "deployment", "web", "--replicas=5")

    async def put_back() -> bool:
        return (await replicas_on(kube, "web")).get(second, (0, 0))[0] == 2

    await wait_for(put_back, timeout=20, message=f"replicas on {second} put back")
    assert await _image(kube[second]) == "nginx:1"
    assert await _image(kube[first]) == "nginx:2"
