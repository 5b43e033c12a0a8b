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
                    expected = 200 if path in ("/healthz", "/readyz") else 401
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
