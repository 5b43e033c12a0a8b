"""Applications given as a TOSCA template (inline or by URL) or a CSAR archive run the objects
their templates describe, and move between the three forms as Krake's clients move them.

Everything goes through the API secured as ``shoal up`` ships it; the templates and
archives are served by a small HTTP server of the test, on loopback, which the test's
outbound policy and ``SHOAL_TOSCA_URLS`` allow.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web

from shoal.api.codec import rfc3339
from shoal.api.server import ApiServer
from shoal.client.kube import KubeCluster
from shoal.client.rest import ApiError, Conflict, ShoalClient
from shoal.machinery import outbound
from shoal.model.base import ReasonCode, utcnow
from shoal.model.kubernetes import Application, ApplicationState
from shoal.model.tosca import URLS_SETTING
from shoal.testing.launch import free_port
from shoal.testing.wait import wait_for
from tests.kube.conftest import NS, running_on
from tests.kube.test_hooks import control_plane  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("control_plane")]


def template(image: str, replicas: int, name: str = "web") -> dict[str, Any]:
    """A Deployment and its Service as two Kubernetes object nodes, the replicas and the
    port given as inputs and put into the text with concat and get_input."""
    deployment = (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas:"
    )
    pods = (
        f"\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n"
        f"      labels:\n        app: {name}\n    spec:\n      containers:\n"
        f"      - name: web\n        image: {image}\n        ports:\n        - containerPort:"
    )
    service = (
        f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  type: NodePort\n"
        f"  selector:\n    app: {name}\n  ports:\n  - port: 80\n    targetPort:"
    )
    return {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        "imports": [{"ec3_custom_types": "https://raw.githubusercontent.com/grycap/ec3/tosca/"
                     "tosca/custom_types.yaml"}],
        "topology_template": {
            "inputs": {
                "replicas": {"type": "integer", "default": replicas},
                "port": {"type": "integer", "default": 8080},
            },
            "node_templates": {
                f"{name}-deployment": {
                    "type": "tosca.nodes.indigo.KubernetesObject",
                    "properties": {"spec": {"concat": [deployment, {"get_input": "replicas"},
                                                       pods, {"get_input": "port"}]}},
                },
                f"{name}-service": {
                    "type": "tosca.nodes.indigo.KubernetesObject",
                    "properties": {"spec": {"concat": [service, {"get_input": "port"}]}},
                },
            },
        },
    }


def csar(tosca: dict[str, Any], entry: str = "app.yaml") -> bytes:
    """A CSAR: the template, and TOSCA-Metadata/TOSCA.meta naming it."""
    meta = (
        "TOSCA-Meta-File-Version: 1.0\nCSAR-Version: 1.1\nCreated-By: a test\n"
        f"Entry-Definitions: {entry}\n"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(entry, yaml.safe_dump(tosca))
        archive.writestr("TOSCA-Metadata/TOSCA.meta", meta)
    return buffer.getvalue()


class Files:
    """Documents served over HTTP on loopback: ``files["/x.yaml"] = b"…"``; ``url(path)``."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.documents: dict[str, bytes] = {}
        self.reads: list[str] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.Response:
        self.reads.append(request.path)
        found = self.documents.get(request.path)
        if found is None:
            return web.Response(status=404)
        return web.Response(body=found)


@pytest.fixture
async def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Files]:
    """The test's documents, which tenants may name: templates may be read from URLs under
    the server's, and tenants' URLs may reach loopback (an administrator's two settings)."""
    port = free_port()
    policy = tmp_path / "outbound.yaml"
    policy.write_text("networks: [127.0.0.0/8]\n")
    monkeypatch.setenv(outbound.SETTING, str(policy))
    monkeypatch.setenv(URLS_SETTING, f"http://127.0.0.1:{port}/")
    served = Files(port)
    app = web.Application()
    app.router.add_get("/{path:.*}", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield served
    finally:
        await runner.cleanup()


def app_of(name: str, **spec: Any) -> Application:
    return Application.model_validate({"metadata": {"name": name, "namespace": NS}, "spec": spec})


async def live_image(kube: dict[str, KubeCluster], cluster: str, name: str) -> tuple[str, int]:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}
    live = await kube[cluster].read(ref, NS)
    assert live is not None
    return live["spec"]["template"]["spec"]["containers"][0]["image"], live["spec"]["replicas"]


async def runs(client: ShoalClient, kube: dict[str, KubeCluster], name: str,
               image: str, replicas: int) -> bool:  # fmt: skip
    """Whether ``name`` is RUNNING with that image and that many replicas on its cluster."""
    cluster = await running_on(client, name)
    if cluster is None:
        return False
    return await live_image(kube, cluster, name) == (image, replicas)


async def test_an_inline_template_runs_its_objects(
    client: ShoalClient, kube: dict[str, KubeCluster]
) -> None:
    created = await client.create(app_of("web", tosca=template("nginx:1.25", 2)))
    # the manifest is there at once, as Krake's clients read it back
    kinds = [(obj["kind"], obj["metadata"]["name"]) for obj in created.spec.manifest]
    assert kinds == [("Deployment", "web"), ("Service", "web")]
    assert created.spec.manifest[0]["spec"]["replicas"] == 2
    assert created.spec.manifest[1]["spec"]["ports"][0]["targetPort"] == 8080
    await wait_for(lambda: runs(client, kube, "web", "nginx:1.25", 2), timeout=60)
    cluster = await running_on(client, "web")
    assert cluster is not None
    service = await kube[cluster].read(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}, NS
    )
    assert service is not None and service["spec"]["type"] == "NodePort"


async def test_an_application_moves_between_manifest_template_url_and_csar(
    client: ShoalClient, kube: dict[str, KubeCluster], files: Files
) -> None:
    first = await client.create(app_of("web", manifest=template_manifest("nginx:1.24", 1)))
    await wait_for(lambda: runs(client, kube, "web", "nginx:1.24", 1), timeout=60)

    # to a template's URL: the client clears the manifest, as rok does
    files.documents["/v2.yaml"] = yaml.safe_dump(template("nginx:1.25", 2)).encode()
    app = await change(client, "web", manifest=[], tosca=files.url("/v2.yaml"))
    image = app.spec.manifest[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "nginx:1.25"
    await wait_for(lambda: runs(client, kube, "web", "nginx:1.25", 2), timeout=60)

    # to a CSAR: manifest and template cleared
    files.documents["/v3.csar"] = csar(template("nginx:1.26", 3))
    await change(client, "web", manifest=[], tosca={}, csar=files.url("/v3.csar"))
    await wait_for(lambda: runs(client, kube, "web", "nginx:1.26", 3), timeout=60)

    # back to a manifest: the stale csar stays, the manifest goes first (Krake's rule)
    reads = len(files.reads)
    app = await change(client, "web", manifest=template_manifest("nginx:1.27", 1))
    assert app.spec.csar == files.url("/v3.csar")
    await wait_for(lambda: runs(client, kube, "web", "nginx:1.27", 1), timeout=60)
    assert first.metadata.uid == app.metadata.uid
    assert set(files.reads) == {"/v2.yaml", "/v3.csar"}
    assert len(files.reads) == reads  # read when written as the application, not after


async def change(client: ShoalClient, name: str, **spec: Any) -> Application:
    """Application ``name`` with ``spec``'s fields set, read and written as a client does."""
    while True:
        app = await client.get(Application, name, NS)
        for field, value in spec.items():
            setattr(app.spec, field, value)
        try:
            return await client.update(app)
        except Conflict:  # a controller wrote its status in between
            continue


def template_manifest(image: str, replicas: int) -> list[dict[str, Any]]:
    """The objects ``template(image, replicas)`` stands for, written out."""
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                      {"name": "web", "image": image, "ports": [{"containerPort": 8080}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
         "spec": {"type": "NodePort", "selector": {"app": "web"},
                  "ports": [{"port": 80, "targetPort": 8080}]}},
    ]  # fmt: skip


async def test_the_same_template_sent_again_changes_nothing(
    client: ShoalClient, files: Files
) -> None:
    files.documents["/app.csar"] = csar(template("nginx:1.25", 1))
    for name, form in (("inline", {"tosca": template("nginx:1.25", 1)}),
                       ("archive", {"csar": files.url("/app.csar")})):  # fmt: skip
        created = await client.create(app_of(name, **form))
        try:  # as rok sends it: the template, not what it became
            await change(client, name, manifest=[])
        except ApiError as error:  # Krake answers 400 "no update"; Shoal may too
            assert error.status == 400, error
        stored = await client.get(Application, name, NS)
        assert stored.spec.manifest == created.spec.manifest
        assert stored.metadata.modified == created.metadata.modified


async def test_a_template_without_objects_is_refused_naming_the_field(
    client: ShoalClient,
) -> None:
    empty = template("nginx:1", 1)
    empty["topology_template"]["node_templates"] = {}
    with pytest.raises(ApiError) as refused:
        await client.create(app_of("empty", tosca=empty))
    assert refused.value.status == 422
    fields = [e["field"] for e in refused.value.problem["errors"]]
    assert fields == ["spec.tosca.topology_template.node_templates"], refused.value.problem

    other = template("nginx:1", 1)
    other["node_types"] = {"example.nodes.Other": {  # a type that is no Kubernetes object
        "derived_from": "tosca.nodes.Root", "properties": {"spec": {"type": "string"}}}}
    other["topology_template"]["node_templates"]["web-service"]["type"] = "example.nodes.Other"
    with pytest.raises(ApiError) as refused:
        await client.create(app_of("other", tosca=other))
    assert refused.value.status == 422
    assert refused.value.problem["errors"][0]["field"] == (
        "spec.tosca.topology_template.node_templates.web-service.type"
    )
    with pytest.raises(ApiError):
        await client.get(Application, "other", NS)


async def test_an_application_with_nothing_to_deploy_is_never_running(
    api: ApiServer, client: ShoalClient
) -> None:
    await client.create(app_of("hollow", manifest=template_manifest("nginx:1", 1)))
    await wait_for(lambda: running_on(client, "hollow"), timeout=60)
    # as Shoal stored a template before it translated them: an empty manifest beside the
    # template (the API refuses that now; the store is written to directly)
    key = Application.key("hollow", NS)
    record = await api.store.get(key)
    data = orjson.loads(record.value)
    data["spec"]["manifest"] = []
    data["spec"]["tosca"] = template("nginx:1", 1)
    data["metadata"]["modified"] = rfc3339(utcnow())
    await api.store.update(key, orjson.dumps(data), record.revision)

    async def waits_with_reason() -> Application | None:
        app = await client.get(Application, "hollow", NS)
        reason = app.status.reason
        if reason is not None and reason.code is ReasonCode.INVALID_TOSCA_MANIFEST:
            return app
        return None

    app = await wait_for(waits_with_reason, timeout=60)
    assert app.status.state is not ApplicationState.RUNNING
    assert "nothing to deploy" in app.status.reason.message
