"""``shoal up``'s zero set-up: its own CA, tokens and key; 401 without credentials; components'
own identities with only the rights they need."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import httpx
import yaml

from shoal.api.auth import bootstrap
from shoal.api.server import start_api
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Cluster
from tests.security.conftest import cluster


async def test_up_defaults(tmp_path: Path) -> None:
    setup = bootstrap.ensure(tmp_path, tls=True)
    again = bootstrap.ensure(tmp_path, tls=True)
    assert again.tokens == setup.tokens  # a second start reuses what the first made
    assert (tmp_path / "security" / "tokens.csv").stat().st_mode & 0o077 == 0
    server = await start_api(f"sqlite://{tmp_path / 'shoal.db'}", security=setup.security)
    try:
        assert server.url.startswith("https://")
        config = yaml.safe_load(setup.write_client_config(server.url).read_text())
        assert config["api"] == server.url and config["ca"] == str(setup.ca)
        trust = ssl.create_default_context(cafile=str(setup.ca))
        async with httpx.AsyncClient(base_url=server.url, verify=trust) as anonymous:
            admin_headers = {"authorization": f"Bearer {config['token']}"}
            spec = (await anonymous.get("/openapi.json", headers=admin_headers)).json()
            for path, methods in spec["paths"].items():
                concrete = re.sub(r"\{[^}]+\}", "x", path)
                for method in methods:
                    answer = await anonymous.request(method.upper(), concrete, json={})
                    # health, and the CA a joining cluster pins by its hash (public, as
                    # kubeadm's cluster-info): nothing else answers a caller without a token
                    expected = 200 if path in ("/healthz", "/readyz", "/cluster-info") else 401
                    if path == "/kubernetes/join":  # its credential is the body's join token
                        expected = 422  # none given: the field named
                        made_up = {"token": "abcdef.0123456789abcdef", "name": "edge"}
                        refused = await anonymous.post(path, json=made_up)
                        assert refused.status_code == 401, refused.text
                    assert answer.status_code == expected, (method, path)
            body = cluster("c1", "default", "kube-secret")
            created = await anonymous.post(
                "/kubernetes/namespaces/default/clusters", json=body, headers=admin_headers
            )
            assert created.status_code == 200
        for component, sees_secret in (
            ("kube-controller", True),
            ("cluster-observer", True),
            ("scheduler", False),
            ("garbage-collector", False),
        ):
            async with ShoalClient(
                server.url, token=setup.token_of(component), ssl_context=trust
            ) as client:
                got = await client.get(Cluster, "c1", "default")
                token = got.spec.kubeconfig["users"][0]["user"]["token"]  # type: ignore[index]
                assert (token == "kube-secret") is sees_secret, component
        async with ShoalClient(
            server.url, token=setup.token_of("scheduler"), ssl_context=trust
        ) as client:
            from shoal.client.rest import ApiError

            try:
                await client.delete(Cluster, "c1", "default")
                raise AssertionError("the scheduler may not delete clusters")
            except ApiError as error:
                assert error.status == 403
    finally:
        await server.stop()


async def test_cli_picks_up_the_credentials_of_shoal_up(tmp_path: Path) -> None:
    """From the directory ``shoal up`` ran in, the CLI uses its URL, admin token and CA."""
    import asyncio
    import os
    import sys

    setup = bootstrap.ensure(tmp_path / "data", tls=True)
    server = await start_api(f"sqlite://{tmp_path / 'shoal.db'}", security=setup.security)
    try:
        setup.write_client_config(server.url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env.update(HOME=str(tmp_path), COLUMNS="200")

        async def shoal(*args: str, **extra: str) -> tuple[int, str]:
            proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "shoal.cli.main", *args),
                cwd=tmp_path,
                env={**env, **extra},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
            return proc.returncode or 0, out.decode()

        code, out = await shoal("list", "roles")
        assert code == 0 and "shoal-scheduler" in out, out
        code, out = await shoal("core", "role", "list")
        assert code == 0 and "shoal-admin" in out, out
        code, out = await shoal("list", "roles", SHOAL_CONFIG=os.devnull, SHOAL_API=server.url)
        assert code != 0, out
    finally:
        await server.stop()
