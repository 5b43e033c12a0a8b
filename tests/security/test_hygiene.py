"""Hygiene: private data files, the dashboard's browser policy, CORS as configured, the
CLI naming a certificate problem, and answers that show what was stored."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import httpx

from shoal.api.server import start_api
from shoal.machinery.tls import Tls, issue, make_ca, write_pair
from shoal.system.installation import private_data_dir
from tests.security.conftest import Secured, security


def test_the_data_directory_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    (data / "shoal.db").write_text("x")
    (data / "logs" / "api.log").write_text("x")
    os.chmod(data / "shoal.db", 0o644)
    os.chmod(data / "logs", 0o755)
    before = os.umask(0o022)
    try:
        private_data_dir(data)
        (data / "kubeconfigs").mkdir()
        (data / "kubeconfigs" / "sim-1.yaml").write_text("x")  # made after: umask
    finally:
        os.umask(before)
    for path in (data, *data.rglob("*")):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


async def test_the_dashboard_sends_a_content_policy(secured: Secured) -> None:
    for path in ("/ui/", "/ui/index.html", "/ui/js/main.js"):
        answer = await secured.anonymous.get(path)
        assert answer.status_code == 200, path
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert answer.headers["x-frame-options"] == "DENY"


async def test_cors_answers_the_configured_origin_only(tmp_path: Path) -> None:
    preflight = {
        "origin": "https://dashboard.example",
        "access-control-request-method": "GET",
        "access-control-request-headers": "authorization",
    }
    for origin, allowed in (("https://dashboard.example", True), (None, False)):
        server = await start_api(
            "sqlite://:memory:", security=security(tmp_path, cors_origin=origin)
        )
        try:
            async with httpx.AsyncClient(base_url=server.url) as http:
                answer = await http.options("/kubernetes/applications", headers=preflight)
                header = answer.headers.get("access-control-allow-origin")
                assert (header == "https://dashboard.example") is allowed, answer.headers
                other = await http.options(
                    "/kubernetes/applications", headers={**preflight, "origin": "https://evil"}
                )
                assert "access-control-allow-origin" not in other.headers
        finally:
            await server.stop()


async def test_a_put_answers_the_stored_requester(secured: Secured) -> None:
    admin = secured["admin"]
    task = {"api": "scheduling", "kind": "RescheduleTask", "metadata": {"name": "t"},
            "spec": {"target_ref_policy": [{"namespace": "a", "label_selector": ""}]}}  # fmt: skip
    created = await admin.post("/scheduling/rescheduletasks", json=task)
    assert created.status_code == 200, created.text
    body = created.json()
    body["spec"]["requested_by"] = {"user": "someone-else", "groups": ["shoal:admins"]}
    answer = await admin.put("/scheduling/rescheduletasks/t", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["spec"]["requested_by"]["user"] == "admin"
    stored = (await admin.get("/scheduling/rescheduletasks/t")).json()
    assert stored["spec"]["requested_by"]["user"] == "admin"


async def test_the_cli_names_an_untrusted_certificate(tmp_path: Path) -> None:
    ca = make_ca()
    key, cert = write_pair(tmp_path, "api", issue(*ca, "shoal-api", hosts=("127.0.0.1",)))
    server = await start_api("sqlite://:memory:", security=security(tmp_path, tls=Tls(cert, key)))
    try:
        env = {**os.environ, "SHOAL_CONFIG": os.devnull, "SHOAL_TOKEN": "admin-token",
               "SHOAL_CA": "", "PYTHONPATH": str(Path(__file__).parents[2])}  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "shoal.cli.main", "--api", server.url, "get", "clusters",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
    finally:
        await server.stop()
    text = (out + err).decode()
    assert process.returncode == 2, text
    assert "certificate not trusted" in text and "SHOAL_CA" in text, text
    assert "cannot reach" not in text
