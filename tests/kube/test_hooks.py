"""Krake's application hooks, driven by a workload the way a real one would.

The "workload" is this test: it reads the credentials the kube controller put
into the member cluster (the Secret and the container's variables), and it
serves the application's shutdown address (its Service's node port on the
cluster's host) with a small HTTP server, as the pods behind it would.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from shoal.api.server import ApiServer
from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.kube.hooks import HookSettings, with_hooks
from shoal.machinery.names import DNS_LABEL, DNS_SUBDOMAIN
from shoal.model.events import Event
from shoal.model.kubernetes import Application, Cluster
from shoal.testing import builders
from shoal.testing.launch import free_port
from shoal.testing.wait import wait_for
from tests.kube.conftest import NS, deployment, running_on
from tests.util import until_gone


@pytest.fixture
def control_plane_options(clusters: list[Cluster]) -> dict[str, Any]:
    """The suite's control plane, started once the clusters are registered."""
    return {}


def app_with(name: str, hooks: list[str], location: str, *objects: dict[str, Any],
             grace: int = 30, placement: dict[str, Any] | None = None) -> Application:  # fmt: skip
    spread = {"placement": placement} if placement is not None else {}
    return builders.app(name, [f"location is {location}"], namespace=NS,
                     manifest=[deployment(name, replicas=1), *objects], hooks=hooks,
                     shutdown_grace_time=grace, **spread)  # fmt: skip


async def injected(kube: KubeCluster, app: str, hook: str) -> tuple[str, str]:
    """The token and URL a container of ``app`` gets, read as the pod would get them."""
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app}}
    live = await kube.read(ref, NS)
    assert live is not None
    env = {e["name"]: e for e in live["spec"]["template"]["spec"]["containers"][0]["env"]}
    found = []
    for variable in (f"KRAKE_{hook.upper()}_TOKEN", f"KRAKE_{hook.upper()}_URL"):
        selector = env[variable]["valueFrom"]["secretKeyRef"]
        assert selector["name"] == f"{app}-krake-{hook}-secret-token"
        secret_ref = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": selector["name"]}}
        secret = await kube.read(secret_ref, NS)
        assert secret is not None
        found.append(base64.b64decode(secret["data"][selector["key"]]).decode())
    return found[0], found[1]


async def reasons(client: ShoalClient, name: str) -> set[str]:
    events = (await client.list(Event, NS)).items
    return {e.reason for e in events if e.involved_object.name == name}


@pytest.mark.usefixtures("control_plane")
async def test_complete_with_the_injected_token_deletes_the_application(
    client: ShoalClient, api: ApiServer, kube: dict[str, KubeCluster]
) -> None:
    await client.create(app_with("batch", ["complete"], "DE"))
    await wait_for(lambda: running_on(client, "batch"), timeout=20, interval=0.1,
                   message="batch RUNNING")  # fmt: skip
    token, url = await injected(kube["de"], "batch", "complete")
    assert url == f"{api.url}/kubernetes/namespaces/{NS}/applications/batch/complete"
    assert (await client.get(Application, "batch", NS)).status.complete_token == token
    async with aiohttp.ClientSession() as http:  # no Shoal credentials: the token is one
        async with http.put(url, json={"token": "not-" + token}) as answer:
            assert answer.status == 401
        async with http.put(url, json={"token": token}) as answer:
            assert answer.status == 200
    await until_gone(client, Application, "batch", NS, timeout=20)
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "batch"}}
    assert await kube["de"].read(ref, NS) is None
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "batch-krake-complete-secret-token"}}  # fmt: skip
    assert await kube["de"].read(secret, NS) is None


@pytest.fixture
async def workload(kube: dict[str, KubeCluster]) -> AsyncIterator[dict[str, Any]]:
    """An HTTP server on a node port that answers ``PUT /shutdown`` as the pods would:
    it notes what it saw, then confirms through the API with its injected token."""
    seen: dict[str, Any] = {"calls": 0, "port": free_port()}

    async def shutdown(request: web.Request) -> web.Response:
        seen["calls"] += 1
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "svc"}}
        seen["copy_still_there"] = await kube["de"].read(ref, NS) is not None
        token, url = await injected(kube["de"], "svc", "shutdown")
        async with aiohttp.ClientSession() as http:
            async with http.put(url, json={"token": token}) as answer:
                seen["confirmed"] = answer.status
                seen["state"] = (await answer.json())["status"]["state"]
        return web.Response(text="bye")

    server = web.Application()
    server.router.add_put("/shutdown", shutdown)
    runner = web.AppRunner(server)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", seen["port"]).start()
    try:
        yield seen
    finally:
        await runner.cleanup()


@pytest.mark.usefixtures("control_plane")
@pytest.mark.parametrize("placement", [None, {"clusters": 1}], ids=["one-cluster", "placement"])
async def test_a_migration_waits_for_the_workload_to_confirm_its_shutdown(
    client: ShoalClient,
    kube: dict[str, KubeCluster],
    workload: dict[str, Any],
    placement: dict[str, Any] | None,
) -> None:
    """A move to another cluster, of an application on one cluster or of one with
    ``spec.placement`` (whose copy on a cluster it no longer uses goes)."""
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "shutdown"},
        "spec": {"type": "NodePort", "selector": {"app": "svc"},
                 "ports": [{"port": 80, "nodePort": workload["port"]}]},
    }  # fmt: skip
    await client.create(app_with("svc", ["shutdown"], "DE", service, placement=placement))
    assert await wait_for(lambda: running_on(client, "svc"), timeout=20, interval=0.1) == "de"
    app = await client.get(Application, "svc", NS)
    app.spec.constraints.cluster.labels = ["location is FR"]  # type: ignore[list-item]
    await client.update(app)

    async def moved() -> bool:
        return await running_on(client, "svc") == "fr" and workload["calls"] > 0

    await wait_for(moved, timeout=20, interval=0.1, message="svc moved to fr")
    assert workload["calls"] == 1
    assert workload["copy_still_there"] is True  # asked before its copy was removed
    assert workload["confirmed"] == 200 and workload["state"] == "READY_FOR_ACTION"
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "svc"}}
    assert await kube["de"].read(ref, NS) is None
    assert await kube["fr"].read(ref, NS) is not None
    final = await client.get(Application, "svc", NS)
    assert final.status.shutdown_grace_period is None

    async def told() -> bool:
        return "ShutdownRequested" in await reasons(client, "svc")

    await wait_for(told, timeout=10, interval=0.1, message="ShutdownRequested event")
    assert "ShutdownTimedOut" not in await reasons(client, "svc")


@pytest.mark.usefixtures("control_plane")
async def test_without_a_confirmation_the_copy_goes_after_the_grace_period(
    client: ShoalClient, kube: dict[str, KubeCluster]
) -> None:
    await client.create(app_with("mute", ["shutdown"], "DE", grace=2))
    assert await wait_for(lambda: running_on(client, "mute"), timeout=20, interval=0.1) == "de"
    await client.delete(Application, "mute", NS)

    async def waiting() -> bool:
        app = await client.get(Application, "mute", NS)
        return app.status.state.value == "WAITING_FOR_CLEANING"

    await wait_for(waiting, timeout=10, interval=0.05, message="WAITING_FOR_CLEANING")
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mute"}}
    assert await kube["de"].read(ref, NS) is not None  # kept while it may still confirm
    await until_gone(client, Application, "mute", NS, timeout=20)
    assert await kube["de"].read(ref, NS) is None

    async def warned() -> set[str] | None:
        found = await reasons(client, "mute")
        return found if {"ShutdownTimedOut", "ShutdownNotReached"} <= found else None

    await wait_for(warned, timeout=10, interval=0.1, message="warning events")


def test_an_https_api_gives_workloads_its_ca_mounted_as_krake_does() -> None:
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox",
                                "env": [{"name": "KEEP", "value": "1"}]}]}}}}}}  # fmt: skip
    settings = HookSettings(endpoint="https://shoal.example:8443", ca="-----BEGIN CA-----")
    out = with_hooks([cron], ["complete"], {"complete": "t0ken"}, ("team", "tick"), settings)
    secrets = {o["metadata"]["name"]: o for o in out if o["kind"] == "Secret"}
    assert sorted(secrets) == ["tick-krake-complete-secret-certs",
                               "tick-krake-complete-secret-token"]  # fmt: skip
    certs = secrets["tick-krake-complete-secret-certs"]["data"]
    assert base64.b64decode(certs["ca-bundle.pem"]).decode() == "-----BEGIN CA-----"
    token = secrets["tick-krake-complete-secret-token"]["data"]
    assert base64.b64decode(token["krake_complete_url"]).decode() == (
        "https://shoal.example:8443/kubernetes/namespaces/team/applications/tick/complete"
    )
    pod = out[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {
            "name": "tick-krake-complete-volume",
            "secret": {"secretName": "tick-krake-complete-secret-certs"},
        }
    ]
    container = pod["containers"][0]
    assert [e["name"] for e in container["env"]] == [
        "KEEP", "KRAKE_COMPLETE_TOKEN", "KRAKE_COMPLETE_URL"
    ]  # fmt: skip
    # where Krake's controller mounts it by default, and where Krake's deployments mount it
    # and its hook scripts read it
    assert container["volumeMounts"] == [
        {"name": "tick-krake-complete-volume", "mountPath": "/etc/krake_complete_certs/"},
        {"name": "tick-krake-complete-volume", "mountPath": "/etc/krake_complete_cert/"},
    ]
    shutdown = with_hooks([cron], ["shutdown"], {"shutdown": "t"}, ("team", "tick"), settings)
    mounts = shutdown[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert [m["mountPath"] for m in mounts["volumeMounts"]] == [
        "/etc/krake_shutdown_certs/", "/etc/krake_shutdown_cert/"
    ]  # fmt: skip
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "KEEP", "value": "1"}
    ]  # the manifest itself is left as it was
    # a hook without its token yet, or not asked for, adds nothing
    assert with_hooks([cron], ["complete"], {}, ("team", "tick"), settings) == [cron]
    assert with_hooks([cron], [], {"complete": "t"}, ("team", "tick"), settings) == [cron]


def test_a_krake_name_gives_kubernetes_names_and_secrets_where_objects_go() -> None:
    """``Web_1:a`` in ``system:admin``: the Secrets and the volume take Kubernetes names; the
    URL keeps Shoal's names; an object without a namespace gets its Secret beside it (no
    namespace: the cluster's default one), one with a namespace in that one."""
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}}}}  # fmt: skip
    placed = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "cfg", "namespace": "team"}}  # fmt: skip
    settings = HookSettings(endpoint="https://shoal.example:8443", ca="-----BEGIN CA-----")
    out = with_hooks([cron, placed], ["complete"], {"complete": "t0ken"},
                     ("system:admin", "Web_1:a"), settings)  # fmt: skip
    secrets = [o for o in out if o["kind"] == "Secret"]
    assert sorted(o["metadata"].get("namespace", "") for o in secrets) == ["", "", "team", "team"]
    for secret in secrets:
        name = secret["metadata"]["name"]
        assert len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name), name
        assert name.startswith("web-1-a-")
    token = next(o for o in secrets if o["metadata"]["name"].endswith("-token"))
    assert base64.b64decode(token["data"]["krake_complete_url"]).decode() == (
        "https://shoal.example:8443/kubernetes/namespaces/system:admin/applications/Web_1:a"
        "/complete"
    )
    pod = out[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [volume] = pod["volumes"]
    assert len(volume["name"]) <= 63 and DNS_LABEL.fullmatch(volume["name"])
