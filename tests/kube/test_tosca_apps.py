"""Applications given as a TOSCA template (inline or by URL) or a CSAR archive run the objects
their templates describe, and move between the three forms as Krake's clients move them.

Everything goes through the API secured as ``shoal up`` ships it; the templates and
archives are served by a small HTTP server of the test, on loopback, which the test's
outbound policy and ``SHOAL_TOSCA_URLS`` allow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from shoal.api.codec import rfc3339
from shoal.api.server import ApiServer
from shoal.client.kube import KubeCluster
from shoal.client.rest import ApiError, Conflict, ShoalClient
from shoal.model.base import ReasonCode, utcnow
from shoal.model.kubernetes import Application, ApplicationState
from shoal.testing import builders
from shoal.testing.wait import wait_for
from tests.fixtures.templates import Files, csar, serving_files, template, template_manifest
from tests.kube.conftest import NS, running_on
from tests.kube.test_hooks import control_plane_options  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("control_plane")]


@pytest.fixture
async def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Files]:
    async with serving_files(tmp_path, monkeypatch) as served:
        yield served


def app_of(name: str, manifest: list[dict[str, Any]] | None = None, **spec: Any) -> Application:
    """An application of a TOSCA template or CSAR (``spec``), without a manifest unless given."""
    return builders.app(name, namespace=NS, manifest=manifest or [], **spec)


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
