"""``shoal import --from-krake``: a real Krake 1.0.1 API on etcd, copied into Shoal.

Krake's API server (``python -m krake.api`` under Krake's Python) holds two
namespaces with 20 clusters and 500 applications (bound, some RUNNING), plus
metrics, providers, roles, clouds and infrastructure providers. After the
import every object is equal field by field on Krake's fields; a second run
changes nothing; ``--dry-run`` from the command line changes nothing either.
Applications deployed by Krake's application controller on ``shoal sim``
clusters, imported, keep running under Shoal's scheduler and application
controller: same cluster, same objects (uids) on it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.api.server import ApiServer
from shoal.cli.import_krake import ORDER, collection, import_from_krake, portable
from shoal.client.rest import ShoalClient
from shoal.sim.server import SimServer
from shoal.testing import shipped
from shoal.testing.builders import KUBECONFIG
from shoal.testing.launch import shoal_env, spawn_shoal, stop
from shoal.testing.wait import wait_for
from tests.api.samples import OPENSTACK
from tests.krake.conftest import configmaps
from tests.krake.controllers import KrakeControllers
from tests.util import made_by_tests

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]

NAMESPACES = ("team-a", "team-b")
NS = "krake"
CLUSTERS = int(os.environ.get("SHOAL_KRAKE_CLUSTERS", "20"))
APPS = int(os.environ.get("SHOAL_KRAKE_IMPORT_APPS", "500"))
OPENSTACK_SPEC = {
    "type": "openstack",
    "openstack": {
        **OPENSTACK,
        "metrics": [{"name": "load", "weight": 1.0}],
        "infrastructure_provider": {"name": "im"},
    },
}


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(path, json=body)
    assert response.status_code == 200, (path, response.text)
    return dict(response.json())


async def _put(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> None:
    response = await http.put(path, json=body)
    assert response.status_code == 200, (path, response.text)


async def _in_batches(calls: list[Any], size: int = 50) -> None:
    for start in range(0, len(calls), size):
        await asyncio.gather(*calls[start : start + size])


async def _fill(http: httpx.AsyncClient) -> None:
    """What a Krake installation holds: every kind, bound and running applications."""
    static = {"type": "static", "static": {"metrics": {"load": 0.4}}}
    await _post(
        http, "/core/globalmetricsproviders", {"metadata": {"name": "static"}, "spec": static}
    )
    metric = {"min": 0, "max": 1, "provider": {"name": "static", "metric": "load"}}
    await _post(http, "/core/globalmetrics", {"metadata": {"name": "load"}, "spec": metric})
    rule = {
        "api": "kubernetes",
        "resources": ["applications"],
        "namespaces": ["team-a"],
        "verbs": ["get"],
    }
    await _post(http, "/core/roles", {"metadata": {"name": "reader"}, "rules": [rule]})
    binding = {"metadata": {"name": "readers"}, "users": ["alice"], "roles": ["reader"]}
    await _post(http, "/core/rolebindings", binding)
    im = {"type": "im", "im": {"url": "https://im.example:8800", "token": "t"}}
    await _post(
        http,
        "/infrastructure/globalinfrastructureproviders",
        {"metadata": {"name": "im"}, "spec": im},
    )
    await _post(
        http, "/infrastructure/globalclouds", {"metadata": {"name": "os"}, "spec": OPENSTACK_SPEC}
    )
    for ns in NAMESPACES:
        await _post(
            http,
            f"/core/namespaces/{ns}/metricsproviders",
            {"metadata": {"name": "static"}, "spec": static},
        )
        await _post(
            http, f"/core/namespaces/{ns}/metrics", {"metadata": {"name": "load"}, "spec": metric}
        )
        await _post(
            http,
            f"/infrastructure/namespaces/{ns}/infrastructureproviders",
            {"metadata": {"name": "im"}, "spec": im},
        )
        await _post(
            http,
            f"/infrastructure/namespaces/{ns}/clouds",
            {"metadata": {"name": "os"}, "spec": OPENSTACK_SPEC},
        )
    clusters = []
    for i in range(CLUSTERS):
        ns = NAMESPACES[i % 2]
        body = {
            "metadata": {"name": f"c{i:02d}", "labels": {"location": ("DE", "FR")[i % 2]}},
            "spec": {
                "kubeconfig": KUBECONFIG,
                "metrics": [{"name": "load", "weight": 1.0}],
                "constraints": {"cloud": {}},
            },
        }
        clusters.append(await _post(http, f"/kubernetes/namespaces/{ns}/clusters", body))
    calls = []
    for i in range(APPS):
        ns = NAMESPACES[i % 2]
        manifest = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"app-{i}"},
                "data": {"i": str(i)},
            }
        ]
        body = {
            "metadata": {"name": f"app-{i:03d}", "labels": {"tier": ("web", "db")[i % 2]}},
            "spec": {
                "manifest": manifest,
                "constraints": {"cluster": {"labels": ["location is DE"]}},
            },
        }
        calls.append(
            _app(http, ns, body, clusters[(i % CLUSTERS) // 2 * 2 + i % 2], running=i % 5 != 0)
        )
    await _in_batches(calls)


async def _app(
    http: httpx.AsyncClient, ns: str, body: dict[str, Any], cluster: dict[str, Any], running: bool
) -> None:
    app = await _post(http, f"/kubernetes/namespaces/{ns}/applications", body)
    ref = {
        "api": "kubernetes",
        "kind": "Cluster",
        "namespace": ns,
        "name": cluster["metadata"]["name"],
    }
    path = f"/kubernetes/namespaces/{ns}/applications/{app['metadata']['name']}"
    await _put(
        http, f"{path}/binding", {"api": "kubernetes", "kind": "ClusterBinding", "cluster": ref}
    )
    if running:
        app = (await http.get(path)).json()
        app["status"].update(
            state="RUNNING", running_on=ref, last_applied_manifest=body["spec"]["manifest"]
        )
        await _put(http, f"{path}/status", app)


async def _krake_and_shoal(krake_url: str, shoal: ShoalClient) -> dict[str, tuple[Any, Any]]:
    """Every kind as Krake and Shoal hold it, on Krake's fields."""
    out = {}
    async with ShoalClient(krake_url, token="") as krake_api:
        for kind in ORDER:
            theirs = (await krake_api.request("GET", collection(kind)))["items"]
            # the shipped API's default roles and bindings are Shoal's own, not imported
            ours = made_by_tests((await shoal.request("GET", collection(kind)))["items"])
            key = lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"])  # noqa: E731
            out[kind.kind_name()] = (
                [portable(kind, o) for o in sorted(theirs, key=key)],
                [portable(kind, o) for o in sorted(ours, key=key)],
            )
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ: ``path: a != b`` for each leaf."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for key in sorted(set(a) | set(b))
            for d in differences(a.get(key), b.get(key), f"{path}.{key}")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


async def test_import_copies_krake_field_by_field_and_twice_changes_nothing(
    krake_api: str, api: ApiServer
) -> None:
    async with httpx.AsyncClient(base_url=krake_api, timeout=60) as http:
        await _fill(http)
    async with (
        shipped.client(api.url) as shoal,
        ShoalClient(krake_api, token="") as krake_client,
    ):
        first = await import_from_krake(krake_client, shoal)
        assert first.failures == []
        assert first.counts["Application"]["created"] == APPS
        assert first.counts["Cluster"]["created"] == CLUSTERS
        for kind, (theirs, ours) in (await _krake_and_shoal(krake_api, shoal)).items():
            assert theirs and len(ours) == len(theirs), kind
            for krake_obj, shoal_obj in zip(theirs, ours, strict=True):
                assert differences(krake_obj, shoal_obj) == [], (kind, krake_obj["metadata"])
        running = (await shoal.request("GET", "/kubernetes/applications"))["items"]
        assert sum(app["status"]["state"] == "RUNNING" for app in running) == APPS - APPS // 5
        second = await import_from_krake(krake_client, shoal)
        assert second.changed == 0 and second.failures == []

    # the command line: a dry run says nothing would change, and changes nothing
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "shoal.cli.main",
            "--api",
            api.url,
            "import",
            "--from-krake",
            krake_api,
            "--dry-run",
        ],
        env={**shoal_env(), "SHOAL_TOKEN": shipped.token(shipped.ADMIN)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert "would create" not in done.stdout and "would update" not in done.stdout
    row = next(line for line in done.stdout.splitlines() if "Application" in line)
    assert row.split()[-5:] == ["0", "0", str(APPS), "0", "│"] or str(APPS) in row, row


async def test_imported_applications_keep_running_under_shoal(
    krake_api: str, krake_python: str, api: ApiServer, sim: SimServer, tmp_path: Path
) -> None:
    """Deployed by Krake's controllers, imported, then run by Shoal's: nothing is redeployed."""
    kubeconfigs = tmp_path / "kubeconfigs"
    clusters, apps = (
        f"/kubernetes/namespaces/{NS}/clusters",
        f"/kubernetes/namespaces/{NS}/applications",
    )
    krake_controllers = KrakeControllers(
        krake_python, krake_api, tmp_path, names=("kubernetes_application",)
    )
    async with httpx.AsyncClient(base_url=krake_api, timeout=30) as http:
        for name in ("de", "fr"):
            body = {
                "metadata": {"name": name, "labels": {"location": name.upper()}},
                "spec": {"kubeconfig": sim.kubeconfig(name), "constraints": {"cloud": {}}},
            }
            cluster = await _post(http, clusters, body)
            cluster["status"]["state"] = "ONLINE"
            await _put(http, f"{clusters}/{name}/status", cluster)
        for i in range(10):
            where = ("DE", "FR")[i % 2]
            manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"app-{i}"}}]
            constraints = {"cluster": {"labels": [f"location is {where}"]}}
            body = {
                "metadata": {"name": f"app-{i}"},
                "spec": {"manifest": manifest, "constraints": constraints},
            }
            await _post(http, apps, body)
            ref = {"api": "kubernetes", "kind": "Cluster", "namespace": NS, "name": where.lower()}
            binding = {"api": "kubernetes", "kind": "ClusterBinding", "cluster": ref}
            await _put(http, f"{apps}/app-{i}/binding", binding)  # as Krake's scheduler binds
        krake_controllers.start()
        try:

            async def running() -> bool:
                items = (await http.get(apps)).json()["items"]
                return len(items) == 10 and all(a["status"]["state"] == "RUNNING" for a in items)

            await wait_for(running, timeout=60, interval=0.5, message="RUNNING under Krake")
        finally:
            krake_controllers.stop()
    deployed = {c: await configmaps(kubeconfigs, c) for c in ("de", "fr")}
    assert sum(len(names) for names in deployed.values()) == 10

    async with (
        shipped.client(api.url) as shoal,
        ShoalClient(krake_api, token="") as krake_client,
    ):
        assert (await import_from_krake(krake_client, shoal)).failures == []
        procs = [
            spawn_shoal(
                command,
                "--api",
                api.url,
                log=tmp_path / f"{command}.log",
                env={"SHOAL_TOKEN": shipped.token(command)},
            )
            for command in ("scheduler", "kube-controller")
        ]
        try:
            await asyncio.sleep(10)  # Shoal's controllers look at every application
            items = (await shoal.request("GET", apps))["items"]
            assert {a["status"]["state"] for a in items} == {"RUNNING"}
            for app in items:
                name = app["metadata"]["name"]
                assert app["status"]["running_on"]["name"] == ("de", "fr")[int(name[4:]) % 2]
                # where Krake put them: its context's namespace, not one named after NS
                on = app["status"]["running_on"]["name"]
                assert app["status"]["kube_namespaces"] == {on: "default"}
            assert {c: await configmaps(kubeconfigs, c) for c in ("de", "fr")} == deployed
            assert {c: await configmaps(kubeconfigs, c, NS) for c in ("de", "fr")} == {
                "de": {}, "fr": {}
            }
        finally:
            for proc in procs:
                stop(proc)
