"""Observer schemas on `shoal sim` clusters: only observed fields are kept in step.

A tenant creates the application on the secured API, the kube controller runs with
its own identity, and the member cluster is changed through its own API with
kubectl, as its operator would. What the member cluster holds afterwards, and what
``status.last_observed_manifest`` says, are the outcomes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.client.kube import KubeCluster
from shoal.client.rest import Invalid, ShoalClient
from shoal.kube.controller import KubeController
from shoal.model import observer_schema as rules
from shoal.model.base import ResourceRef
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.shipped import Callers
from tests import util
from tests.conftest import Tenant
from tests.kube.conftest import NS
from tests.model.test_observer_schema import ECHO
from tests.util import started, wait_for

pytestmark = pytest.mark.integration

DE = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="de")
IMAGE, OTHER_IMAGE = ECHO["spec"]["template"]["spec"]["containers"][0]["image"], "echoserver:1.4"

SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "echo-demo"},
    "spec": {
        "type": "NodePort",
        "selector": {"app": "echo"},
        "ports": [{"port": 8080, "protocol": "TCP", "targetPort": 8080}],
    },
}

# Krake's custom schema of its echo-demo: replicas observed though the manifest leaves
# them to the cluster, the image not observed though the manifest sets it. More ports
# may be added (no maximum), which lets a test see the controller has looked.
CUSTOM: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "echo-demo", "namespace": None},
    "spec": {
        "replicas": None,
        "selector": {"matchLabels": {"app": None}},
        "template": {
            "metadata": {"labels": {"app": None}},
            "spec": {"containers": [
                {"name": None, "ports": [
                    {"containerPort": None},
                    {rules.MIN_LENGTH: 1, rules.MAX_LENGTH: 0},
                ]},
                {rules.MIN_LENGTH: 1, rules.MAX_LENGTH: 1},
            ]},
        },
    },
}  # fmt: skip


def _app(name: str, schema: list[dict[str, Any]]) -> Application:
    deployment = json.loads(json.dumps(ECHO).replace("echo-demo", name))
    service = json.loads(json.dumps(SERVICE).replace("echo-demo", name))
    return builders.app(name, namespace=NS, manifest=[deployment, service], observer_schema=schema)


@pytest.fixture
async def controller(client_of: Callers, clusters: list[Cluster]) -> AsyncIterator[KubeController]:
    """The kube controller as shipped (its own identity); the watches tell it of changes."""
    async with started(KubeController(
        client_of("kube-controller"), poll_interval=20.0, fallback=20.0, resync=60.0, timeout=2.0
    )) as ctl:
        yield ctl


@pytest.fixture
async def alice(tenant: Tenant) -> ShoalClient:
    return await tenant("alice", NS)


@pytest.fixture
def kubectl(sim: SimServer, tmp_path: Path) -> Callable[..., Any]:
    """``await kubectl("patch", ...)`` on cluster de, through its own API."""
    config = tmp_path / "de.yaml"
    config.write_text(yaml.safe_dump(sim.clusters.kubeconfig("de")))

    async def run(*args: str) -> str:
        return await util.kubectl(config, "-n", NS, *args)

    return run


async def _running(client: ShoalClient, name: str) -> Application | None:
    app = await client.get(Application, name, NS)
    return app if app.status.state is ApplicationState.RUNNING else None


async def _deployment(kube: KubeCluster, name: str) -> dict[str, Any]:
    live = await kube.read({"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": name}}, NS)  # fmt: skip
    assert live is not None
    return live


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def _patch_container(**fields: Any) -> str:
    container = {"name": "echo", **fields}
    return json.dumps({"spec": {"template": {"spec": {"containers": [container]}}}})


async def test_only_observed_fields_are_put_back(
    client: ShoalClient, alice: ShoalClient, kube: dict[str, KubeCluster],
    controller: KubeController, kubectl: Callable[..., Any],
) -> None:  # fmt: skip
    await alice.create(_app("echo-demo", [CUSTOM]))
    await client.bind(await client.get(Application, "echo-demo", NS), DE)
    app = await wait_for(lambda: _running(alice, "echo-demo"), timeout=15, message="RUNNING")

    # replicas, which the manifest leaves to the cluster, recorded as the cluster set them
    status = app.status
    assert status.last_applied_manifest[0]["spec"]["replicas"] == 1
    assert status.mangled_observer_schema == [CUSTOM, rules.default_schema(SERVICE)]
    observed = status.last_observed_manifest[0]
    assert observed["spec"]["replicas"] == 1
    assert observed["metadata"] == {"name": "echo-demo", "namespace": NS}
    assert _container(observed) == {"name": "echo", "ports": [
        {"containerPort": 8080}, {rules.CURRENT_LENGTH: 1}]}  # fmt: skip
    assert status.last_observed_manifest[1]["spec"]["ports"][-1] == {rules.CURRENT_LENGTH: 1}
    repairs = controller.drift_repairs

    # the image is not observed: changed on the cluster, it stays changed
    await kubectl("patch", "deployment", "echo-demo", "--patch",
                  _patch_container(image=OTHER_IMAGE))  # fmt: skip
    # an observed list grows within its range: the controller reports it and reverts nothing
    await kubectl("patch", "deployment", "echo-demo", "--patch",
                  _patch_container(ports=[{"containerPort": 9090}]))  # fmt: skip

    async def reported() -> Application | None:
        app = await alice.get(Application, "echo-demo", NS)
        ports = _container(app.status.last_observed_manifest[0])["ports"]
        return app if ports[-1] == {rules.CURRENT_LENGTH: 2} else None

    app = await wait_for(reported, timeout=15, message="two ports in last_observed_manifest")
    live = await _deployment(kube["de"], "echo-demo")
    assert _container(live)["image"] == OTHER_IMAGE
    assert [p["containerPort"] for p in _container(live)["ports"]] == [8080, 9090]
    assert controller.drift_repairs == repairs
    assert "image" not in _container(app.status.last_observed_manifest[0])
    assert app.status.state is ApplicationState.RUNNING

    # replicas are observed: scaled on the cluster, they are put back to 1
    await kubectl("scale", "deployment", "echo-demo", "--replicas=3")

    async def put_back() -> bool:
        return (await _deployment(kube["de"], "echo-demo"))["spec"]["replicas"] == 1

    await wait_for(put_back, timeout=15, message="replicas put back to 1")
    assert controller.drift_repairs > repairs
    app = await wait_for(lambda: _running(alice, "echo-demo"), timeout=15, message="RUNNING")
    assert app.status.last_observed_manifest[0]["spec"]["replicas"] == 1


async def test_the_default_schema_keeps_what_the_manifest_sets(
    client: ShoalClient, alice: ShoalClient, kube: dict[str, KubeCluster],
    controller: KubeController, kubectl: Callable[..., Any],
) -> None:  # fmt: skip
    await alice.create(_app("plain", []))
    await client.bind(await client.get(Application, "plain", NS), DE)
    app = await wait_for(lambda: _running(alice, "plain"), timeout=15, message="RUNNING")
    deployment, service = app.spec.manifest
    assert app.status.mangled_observer_schema == [
        rules.default_schema(deployment), rules.default_schema(service)]  # fmt: skip
    assert app.status.last_applied_manifest == app.spec.manifest
    assert _container(app.status.last_observed_manifest[0])["image"] == IMAGE
    assert "replicas" not in app.status.last_observed_manifest[0]["spec"]

    await kubectl("patch", "deployment", "plain", "--patch", _patch_container(image=OTHER_IMAGE))

    async def put_back() -> bool:
        return _container(await _deployment(kube["de"], "plain"))["image"] == IMAGE

    await wait_for(put_back, timeout=15, message="image put back")
    assert controller.drift_repairs >= 1


async def test_a_bad_schema_is_refused_with_its_field(alice: ShoalClient) -> None:
    bad = json.loads(json.dumps(CUSTOM))
    bad["spec"]["replicas"] = 2
    with pytest.raises(Invalid) as refused:
        await alice.create(_app("bad", [bad]))
    assert refused.value.status == 422
    errors = refused.value.problem["errors"]
    assert errors[0]["field"] == "spec.observer_schema[0].spec.replicas"
    assert "must be null" in errors[0]["reason"]

    stranger = {**CUSTOM, "metadata": {"name": "stranger"}}
    with pytest.raises(Invalid) as refused:
        await alice.create(_app("bad", [stranger]))
    assert refused.value.problem["errors"][0]["field"] == "spec.observer_schema[0]"
    assert "spec.manifest does not have" in refused.value.problem["errors"][0]["reason"]
    assert [a.metadata.name for a in (await alice.list(Application, NS)).items] == []


async def test_a_restarted_controller_goes_on_from_what_it_observed(
    client: ShoalClient, alice: ShoalClient, kube: dict[str, KubeCluster],
    client_of: Callers, clusters: list[Cluster], kubectl: Callable[..., Any],
) -> None:  # fmt: skip
    def make() -> KubeController:
        return KubeController(client_of("kube-controller"), poll_interval=20.0, fallback=20.0,
                              resync=60.0, timeout=2.0)  # fmt: skip

    first = make()
    await first.start()
    try:
        await alice.create(_app("echo-demo", [CUSTOM]))
        await client.bind(await client.get(Application, "echo-demo", NS), DE)
        await wait_for(lambda: _running(alice, "echo-demo"), timeout=15, message="RUNNING")
    finally:
        await first.stop()

    # while no controller runs: the image changes (not observed), a port is added (an
    # observed list, within its range)
    await kubectl("patch", "deployment", "echo-demo", "--patch",
                  _patch_container(image=OTHER_IMAGE))  # fmt: skip
    await kubectl("patch", "deployment", "echo-demo", "--patch",
                  _patch_container(ports=[{"containerPort": 9090}]))  # fmt: skip

    second = make()
    await second.start()
    try:
        async def reported() -> bool:
            app = await alice.get(Application, "echo-demo", NS)
            ports = _container(app.status.last_observed_manifest[0])["ports"]
            return bool(ports[-1] == {rules.CURRENT_LENGTH: 2})

        await wait_for(reported, timeout=15, message="the new port in last_observed_manifest")
        assert _container(await _deployment(kube["de"], "echo-demo"))["image"] == OTHER_IMAGE
        assert second.drift_repairs == 0

        # an observed field changed meanwhile is put back at once
        await second.stop()
        await kubectl("scale", "deployment", "echo-demo", "--replicas=4")
        second = make()
        await second.start()

        async def put_back() -> bool:
            return (await _deployment(kube["de"], "echo-demo"))["spec"]["replicas"] == 1

        await wait_for(put_back, timeout=15, message="replicas put back after the restart")
    finally:
        await second.stop()
