"""As shipped: Krake's hooks (a workload's call with its hook token and no login reaches the
hook's token check) and the components' metrics (only for the scrape token), under the
security ``shoal up`` runs with."""

from __future__ import annotations

import asyncio
import base64
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from shoal.system.components import NAMES
from shoal.testing.builders import deployment
from shoal.testing.wait import wait_for
from tests.cli.conftest import process
from tests.fixtures.prometheus import start_prometheus
from tests.security.conftest import Secured, application
from tests.util import up_port

HOOK = "/kubernetes/namespaces/a/applications/alice-app/complete"


async def test_a_hook_call_without_login_reaches_the_token_check(secured: Secured) -> None:
    alice, anonymous = secured["alice"], secured.anonymous
    created = await alice.post("/kubernetes/namespaces/a/applications",
                               json=application("alice-app", "a"))  # fmt: skip
    assert created.status_code == 200, created.text
    for hook in ("complete", "shutdown"):
        path = HOOK.replace("complete", hook)
        answer = await anonymous.put(path, json={"token": "a-guess"})
        assert answer.status_code == 401, answer.text
        assert f"token: not the {hook} token of this application" in answer.text
    # an application that does not exist is answered alike: no login tells what exists
    missing = await anonymous.put(HOOK.replace("alice-app", "nothing"), json={"token": "x"})
    assert missing.status_code == 401, missing.text
    assert "token: not the complete token of this application" in missing.text
    # a credential presented is checked as such: a wrong one is never anonymous
    answer = await anonymous.put(HOOK, json={"token": "x"},
                                 headers={"authorization": "Bearer wrong"})  # fmt: skip
    assert answer.status_code == 401 and "bearer token: not recognised" in answer.text
    # only the hooks: every other write without a login is refused at the door
    for method, path in (
        ("PUT", "/kubernetes/namespaces/a/applications/alice-app"),
        ("POST", "/kubernetes/namespaces/a/applications/alice-app/complete"),
        ("PUT", "/kubernetes/namespaces/a/applications/alice-app/retry"),
    ):
        answer = await anonymous.request(method, path, json={"token": "x"})
        assert answer.status_code in (401, 405), (method, path, answer.text)
        if answer.status_code == 401:
            assert "no credentials" in answer.text
    still = await alice.get("/kubernetes/namespaces/a/applications/alice-app")
    assert still.status_code == 200


ENV = {"COLUMNS": "200", "PATH": "/usr/bin:/bin"}


async def _member_read(kubeconfig: dict[str, Any], path: str) -> httpx.Response:
    """``GET path`` on a member cluster with its kubeconfig's server and token."""
    server = kubeconfig["clusters"][0]["cluster"]["server"]
    token = kubeconfig["users"][0]["user"]["token"]
    async with httpx.AsyncClient(
        base_url=server, headers={"authorization": f"Bearer {token}"}, verify=False
    ) as member:
        return await member.get(path)


async def _metrics_need_the_scrape_token(
    data: Path, port: int, admin: httpx.AsyncClient, admin_token: str
) -> None:
    """The components' metrics name namespaces and clusters: every one (the scheduler and
    each controller) answers only the scrape token, which the API's ``/metrics`` takes too."""
    scrape = (data / "security" / "metrics.token").read_text().strip()
    assert (data / "security" / "metrics.token").stat().st_mode & 0o077 == 0
    async with httpx.AsyncClient(timeout=30) as http:
        for component in range(port + 1, port + 1 + len(NAMES)):  # each component's
            url = f"http://127.0.0.1:{component}/metrics"
            for headers in ({}, {"authorization": f"Bearer {admin_token}"},
                            {"authorization": "Bearer " + scrape[:-1]}):  # fmt: skip
                refused = await http.get(url, headers=headers)
                assert refused.status_code == 401, (url, headers, refused.text)
                assert "default" not in refused.text and "sim-" not in refused.text
        for component in (port + 1, port + 2):  # the scheduler, the kube controller
            url = f"http://127.0.0.1:{component}/metrics"

            async def scraped(url: str = url) -> str | None:
                answer = await http.get(url, headers={"authorization": f"Bearer {scrape}"})
                assert answer.status_code == 200, answer.text
                return answer.text if "shoal_informer_objects" in answer.text else None

            await wait_for(scraped, timeout=30, interval=0.2, message=f"{url} scraped")
    api = await admin.get("/metrics", headers={"authorization": f"Bearer {scrape}"})
    assert api.status_code == 200 and "shoal_api_requests_total" in api.text
    # Prometheus configured as docs/observability.md shows: every target up, the board's
    # applications per cluster answered
    targets = tuple(f"127.0.0.1:{p}" for p in range(port, port + 1 + len(NAMES)))
    token_file = data / "security" / "metrics.token"
    with start_prometheus({"shoal_probe": 1}, targets=targets, credentials_file=token_file) as prom:

        def all_up() -> bool:
            up = prom.query('up{job="shoal"}')
            return len(up) == len(targets) and all(r["value"][1] == "1" for r in up)

        prom.wait_until(all_up, 60, "every shoal target up")
        board = 'sum by (cluster, state) (shoal_applications{cluster!=""})'
        prom.wait_until(lambda: bool(prom.query(board)), 60, "applications per cluster")


@pytest.mark.integration
async def test_under_shoal_up_a_workload_completes_with_its_token(tmp_path: Path) -> None:
    """The workload reads its token and URL from the Secret on its member cluster, as its
    pod would, and calls ``complete`` with no login: its application is deleted."""
    port = up_port()
    up = await process("up", "--port", str(port), "--data-dir", str(tmp_path), env=ENV)
    try:
        config_file = tmp_path / "security" / "config.yaml"
        await wait_for(lambda: config_file.exists() or up.returncode is not None,
                       timeout=60, message="shoal up's banner")  # fmt: skip
        assert up.returncode is None, "shoal up exited"
        config = yaml.safe_load(config_file.read_text())
        async with httpx.AsyncClient(
            base_url=config["api"],
            headers={"authorization": f"Bearer {config['token']}"},
            verify=config.get("ca") or True,
            timeout=30,
        ) as admin:
            body = {
                "api": "kubernetes",
                "kind": "Application",
                "metadata": {"name": "batch", "namespace": "default"},
                "spec": {"manifest": [deployment("batch", "busybox")], "hooks": ["complete"]},
            }
            created = await admin.post("/kubernetes/namespaces/default/applications", json=body)
            assert created.status_code == 200, created.text
            app_path = "/kubernetes/namespaces/default/applications/batch"

            async def running() -> dict[str, Any] | None:
                app: dict[str, Any] = (await admin.get(app_path)).json()
                status = app.get("status") or {}
                ok = status.get("state") == "RUNNING" and status.get("complete_token")
                return app if ok else None

            app = await wait_for(running, timeout=90, interval=0.2, message="batch RUNNING")
            await _metrics_need_the_scrape_token(tmp_path, port, admin, config["token"])
            cluster = app["status"]["scheduled_to"]["name"]
            member = await admin.get(f"/kubernetes/namespaces/default/clusters/{cluster}")
            kubeconfig = member.json()["spec"]["kubeconfig"]
            secret = await _member_read(
                kubeconfig, "/api/v1/namespaces/default/secrets/batch-krake-complete-secret-token"
            )
            assert secret.status_code == 200, secret.text
            data = {k: base64.b64decode(v).decode() for k, v in secret.json()["data"].items()}
            token, url = data["krake_complete_token"], data["krake_complete_url"]
            assert url == f"{config['api']}{app_path}/complete"
            async with httpx.AsyncClient(verify=config.get("ca") or True) as workload:
                wrong = await workload.put(url, json={"token": "not-" + token})
                assert wrong.status_code == 401 and "not the complete token" in wrong.text
                answer = await workload.put(url, json={"token": token})
                assert answer.status_code == 200, answer.text

            async def deleted() -> bool:
                return (await admin.get(app_path)).status_code == 404

            await wait_for(deleted, timeout=60, interval=0.2, message="batch deleted")
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(up.communicate(), 60)
    assert "Traceback" not in out.decode(), out.decode()[-4000:]
