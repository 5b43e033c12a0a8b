"""Krake 1.0.1's client and controllers with applications given as TOSCA and CSAR.

Krake's own client (its data classes, which parse the template too) creates an
application from an inline TOSCA template and moves it to a CSAR archive served by
the test; Shoal's API turns each into the manifest when it is written, and Krake's
own scheduler and application controller, finding the manifest filled, deploy it to
a ``shoal sim`` cluster, where kubectl reads it back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import yaml

from shoal.api.server import ApiServer
from shoal.sim.server import SimServer
from tests.fixtures.templates import Files, csar, serving_files
from tests.krake.conftest import configmaps, run_krake
from tests.krake.controllers import KrakeControllers
from tests.krake.test_controllers import NS, _wait

pytestmark = [pytest.mark.integration, pytest.mark.slow]

APPS = f"/kubernetes/namespaces/{NS}/applications"


@pytest.fixture
async def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Files]:
    async with serving_files(tmp_path, monkeypatch) as served:
        yield served


def configmap_template(name: str) -> dict[str, object]:
    """A template of one ConfigMap, its type given inline."""
    kind = "tosca.nodes.indigo.KubernetesObject"
    text = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  size: large\n"
    return {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        "node_types": {
            kind: {"derived_from": "tosca.nodes.Root", "properties": {"spec": {"type": "string"}}}
        },
        "topology_template": {
            "node_templates": {"config": {"type": kind, "properties": {"spec": text}}}
        },
    }


async def test_krake_deploys_tosca_then_csar_applications(
    open_api: ApiServer, sim: SimServer, krake_python: str, tmp_path: Path, files: Files
) -> None:
    # Krake's client and controllers send no token: they need an API without security.
    api = open_api
    files.documents["/app.csar"] = csar(configmap_template("web-csar"))
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        response = await http.post(
            f"/kubernetes/namespaces/{NS}/clusters",
            json={"metadata": {"name": "de"}, "spec": {"kubeconfig": sim.kubeconfig("de")}},
        )
        assert response.status_code == 200, response.text
        cluster = response.json()
        cluster["status"]["state"] = "ONLINE"  # as Krake's cluster controller reports it
        response = await http.put(f"/kubernetes/namespaces/{NS}/clusters/de/status", json=cluster)
        assert response.status_code == 200, response.text
        controllers = KrakeControllers(krake_python, api.url, tmp_path)
        controllers.start()
        try:
            lines = await run_krake(krake_python, "tosca_probe.py", api.url, NS, "web",
                                    files.url("/app.csar"))  # fmt: skip
            assert lines == [
                {"step": "created", "manifest": [["ConfigMap", "web-tosca"]], "tosca": True,
                 "csar": None},
                {"step": "updated", "manifest": [["ConfigMap", "web-csar"]], "tosca": False,
                 "csar": files.url("/app.csar")},
            ]  # fmt: skip
            kubeconfigs = tmp_path / "kubeconfigs"

            async def deployed() -> bool:
                app = (await http.get(f"{APPS}/web")).json()
                on_cluster = await configmaps(kubeconfigs, "de")
                return app["status"]["state"] == "RUNNING" and "web-csar" in on_cluster

            await _wait(controllers, deployed, 90, "the CSAR's ConfigMap RUNNING on de")
            stored = (await http.get(f"{APPS}/web")).json()
            assert stored["spec"]["manifest"][0]["data"] == {"size": "large"}
            assert yaml.safe_dump(stored["spec"]["manifest"])  # a plain document
        finally:
            controllers.stop()
