"""Krake 1.0.1's scheduler, application controller and garbage collector, unchanged, on Shoal.

Shoal serves the API only; Krake's controllers (subprocesses of Krake's Python,
``tests/krake/controllers.py``) place applications on two ``shoal sim``
clusters by label and metric constraints, deploy them there, migrate one when
its constraint changes and remove one when it is deleted. What landed on each
cluster is read back with kubectl.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.api.server import ApiServer
from shoal.sim.server import SimServer
from shoal.testing.wait import wait_for
from tests.krake.conftest import configmaps
from tests.krake.controllers import KrakeControllers

# The waits below add up to more than the suite's default timeout of 120 s.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

NS = "krake"
APPS = f"/kubernetes/namespaces/{NS}/applications"
CLUSTERS = f"/kubernetes/namespaces/{NS}/clusters"
# Forty applications give each constraint ten; Krake's scheduler places them one
# at a time, which takes about 25 s for a hundred on an idle machine.
COUNT = int(os.environ.get("SHOAL_KRAKE_APPS", "40"))
# constraint -> the cluster it selects: labels, and metric values (de 0.2, fr 0.9)
PLACEMENT = {
    ("labels", "location is DE"): "de",
    ("labels", "location is FR"): "fr",
    ("metrics", "load_de < 0.5"): "de",
    ("metrics", "load_fr > 0.5"): "fr",
}


async def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


async def _fleet(http: httpx.AsyncClient, sim: SimServer) -> None:
    """A static metrics provider, one metric per cluster, both clusters ONLINE."""
    await _ok(
        await http.post(
            "/core/globalmetricsproviders",
            json={
                "metadata": {"name": "static"},
                "spec": {"type": "static", "static": {"metrics": {"de": 0.2, "fr": 0.9}}},
            },
        )
    )
    for name in ("de", "fr"):
        await _ok(
            await http.post(
                "/core/globalmetrics",
                json={
                    "metadata": {"name": f"load_{name}"},
                    "spec": {"min": 0, "max": 1, "provider": {"name": "static", "metric": name}},
                },
            )
        )
        cluster = await _ok(
            await http.post(
                CLUSTERS,
                json={
                    "metadata": {"name": name, "labels": {"location": name.upper()}},
                    "spec": {
                        "kubeconfig": sim.kubeconfig(name),
                        "metrics": [{"name": f"load_{name}", "weight": 1.0}],
                    },
                },
            )
        )
        cluster["status"]["state"] = "ONLINE"  # as Krake's cluster controller reports it
        await _ok(await http.put(f"{CLUSTERS}/{name}/status", json=cluster))


def _app(name: str, kind: str, constraint: str) -> dict[str, Any]:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"app": name},
    }
    return {
        "metadata": {"name": name},
        "spec": {"manifest": [manifest], "constraints": {"cluster": {kind: [constraint]}}},
    }


async def _apps(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    listed = await _ok(await http.get(APPS))
    return {item["metadata"]["name"]: item for item in listed["items"]}


async def test_krake_controllers_place_deploy_migrate_and_delete(
    open_api: ApiServer, sim: SimServer, krake_python: str, tmp_path: Path
) -> None:
    # Krake's controllers send no token: they need an API without security.
    api = open_api
    controllers = KrakeControllers(krake_python, api.url, tmp_path)
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        await _fleet(http, sim)
        controllers.start()
        try:
            expected: dict[str, str] = {}
            constraints = list(PLACEMENT.items())
            for i in range(COUNT):
                (kind, constraint), cluster = constraints[i % len(constraints)]
                name = f"app-{i:03d}"
                expected[name] = cluster
                await _ok(await http.post(APPS, json=_app(name, kind, constraint)))

            async def placed() -> bool:
                apps = await _apps(http)
                assert all(code is None for code in controllers.running().values()), (
                    controllers.logs()
                )
                return len(apps) == COUNT and all(
                    app["status"]["state"] == "RUNNING"
                    and (app["status"]["running_on"] or {}).get("name") == expected[name]
                    for name, app in apps.items()
                )

            await _wait(controllers, placed, 60 + COUNT, "all RUNNING where they belong")
            kubeconfigs = tmp_path / "kubeconfigs"
            for cluster in ("de", "fr"):
                wanted = {name for name, where in expected.items() if where == cluster}
                assert set(await configmaps(kubeconfigs, cluster)) == wanted

            # a changed label constraint moves the application to the other cluster
            moved = next(n for n, c in expected.items() if c == "de")
            app = (await _apps(http))[moved]
            app["spec"]["constraints"]["cluster"] = {"labels": ["location is FR"]}
            await _ok(await http.put(f"{APPS}/{moved}", json=app))

            async def migrated() -> bool:
                app = (await _apps(http))[moved]
                on = (app["status"]["running_on"] or {}).get("name")
                return app["status"]["state"] == "RUNNING" and on == "fr"

            await _wait(controllers, migrated, 60, f"{moved} RUNNING on fr")
            await _wait(
                controllers,
                lambda: _absent_and_present(kubeconfigs, moved, gone="de", there="fr"),
                30,
                f"{moved} moved from de to fr",
            )

            # deleting an application removes its ConfigMap from its cluster
            gone = next(n for n, c in expected.items() if c == "fr" and n != moved)
            response = await http.delete(f"{APPS}/{gone}")
            assert response.status_code == 200, response.text

            async def deleted() -> bool:
                return gone not in await _apps(http) and gone not in await configmaps(
                    kubeconfigs, "fr"
                )

            await _wait(controllers, deleted, 60, f"{gone} gone from the API and from fr")
        finally:
            controllers.stop()


async def _wait(
    controllers: KrakeControllers, condition: Callable[[], Any], timeout: float, what: str
) -> None:
    """``wait_for``, failing with the controllers' logs."""
    try:
        await wait_for(condition, timeout=timeout, interval=0.5, message=what)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{controllers.logs()}") from None


async def _absent_and_present(kubeconfigs: Path, name: str, gone: str, there: str) -> bool:
    return name not in await configmaps(kubeconfigs, gone) and name in await configmaps(
        kubeconfigs, there
    )
