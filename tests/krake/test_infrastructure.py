"""Krake 1.0.1's own scheduler and infrastructure controller, unchanged, on Shoal and IM.

Shoal serves the API only. Krake's scheduler binds a cluster to a cloud;
Krake's infrastructure controller adds its finalizer, creates the
infrastructure at the Infrastructure Manager (IM 2.0 from PyPI, its own
server), records the id and follows IM's state, all through Shoal's API. Krake
sends IM the bound cloud's OpenStack login only, and no OpenStack answers
here: IM reports the build failed, and Krake's controller says so (FAILED,
RECONCILE_FAILED). Deleting the cluster then has Krake's controller delete the
infrastructure at IM and remove its finalizer. The success path of a build is
tested with Shoal's controller in tests/infrastructure/test_im.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from shoal.api.server import ApiServer
from shoal.testing.wait import wait_for
from tests.infrastructure.conftest import im_process, im_url, template
from tests.krake.controllers import KrakeControllers

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]
__all__ = ["im_process", "im_url"]  # fixtures, used by name

NS = "krake"
CLUSTERS = f"/kubernetes/namespaces/{NS}/clusters"
IM_AUTH = (
    "id = im; type = InfrastructureManager; username = krake; password = secret\\n"
    "id = os-de; type = OpenStack; host = http://127.0.0.1:9/v3; auth_version = 3.x_password;"
    " username = u; password = p; tenant = t"
)


async def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


async def im_infrastructures(im: str) -> list[str]:
    """The infrastructures IM holds for Krake's login, from IM itself."""
    headers = {"Authorization": IM_AUTH, "Accept": "application/json"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(f"{im}/infrastructures") as answer:
            assert answer.status == 200, await answer.text()
            body = await answer.json()
    return [entry["uri"].rsplit("/", 1)[-1] for entry in body.get("uri-list", [])]


async def test_krakes_infrastructure_controller_creates_follows_and_deletes(
    open_api: ApiServer, im_url: str, krake_python: str, tmp_path: Path
) -> None:
    # Krake's controllers send no token: they need an API without security.
    api = open_api
    controllers = KrakeControllers(krake_python, api.url, tmp_path,
                                   names=("scheduler", "infrastructure"))  # fmt: skip
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        await _ok(await http.post("/infrastructure/globalinfrastructureproviders", json={
            "metadata": {"name": "im"},
            "spec": {"type": "im",
                     "im": {"url": im_url, "username": "krake", "password": "secret"}},
        }))  # fmt: skip
        await _ok(await http.post("/infrastructure/globalclouds", json={
            "metadata": {"name": "os-de", "labels": {"location": "DE"}},
            "spec": {"type": "openstack", "openstack": {
                "url": "http://127.0.0.1:9/v3",
                "auth": {"type": "password", "password": {
                    "version": "3", "user": {"username": "u", "password": "p"},
                    "project": {"name": "t"}}},
                "infrastructure_provider": {"name": "im"},
            }},
        }))  # fmt: skip
        await _ok(await http.post(CLUSTERS, json={
            "metadata": {"name": "edge"},
            "spec": {"tosca": template(workers=1),
                     "constraints": {"cloud": {"labels": ["location is DE"]}}},
        }))  # fmt: skip
        controllers.start()
        try:

            async def failed() -> dict[str, Any] | None:
                assert all(code is None for code in controllers.running().values()), (
                    controllers.logs()
                )
                cluster = await _ok(await http.get(f"{CLUSTERS}/edge"))
                return cluster if cluster["status"]["state"] == "FAILED" else None

            cluster = await wait_for(failed, timeout=90, interval=0.2,
                                     message="Krake's controller reports IM's failure")  # fmt: skip
            status = cluster["status"]
            assert status["scheduled_to"]["name"] == "os-de", controllers.logs()
            assert status["running_on"] == status["scheduled_to"]
            assert status["reason"]["code"] == "RECONCILE_FAILED"
            assert status["last_applied_tosca"] == template(workers=1)
            assert cluster["metadata"]["finalizers"] == ["infrastructure_resources_deletion"]
            assert await im_infrastructures(im_url) == [status["cluster_id"]]

            await _ok(await http.delete(f"{CLUSTERS}/edge"))

            async def removed() -> bool:
                answer = await http.get(f"{CLUSTERS}/edge")
                return answer.status_code == 404 and not await im_infrastructures(im_url)

            await wait_for(removed, timeout=90, interval=0.2,
                           message="the cluster and its infrastructure deleted")  # fmt: skip
        except AssertionError as error:
            raise AssertionError(f"{error}\n{controllers.logs()}") from error
        finally:
            controllers.stop()
