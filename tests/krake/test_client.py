"""Krake's own client library (krake 1.0.1), unchanged, against Shoal.

Every method of ``KubernetesApi``, ``CoreApi`` and ``InfrastructureApi``:
created from Krake's data classes, and every answer read back through them.
"""

from __future__ import annotations

import json

import pytest

from shoal.api.server import ApiServer
from shoal.testing.builders import KUBECONFIG
from tests.api.samples import OPENSTACK
from tests.krake.conftest import run_krake

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_every_krake_client_call_succeeds(open_api: ApiServer, krake_python: str) -> None:
    # Krake's client sends no token (Krake's deployments authenticate it by a TLS client
    # certificate, or run its API open): an open API, as for Krake's controllers
    api = open_api
    openstack = {**OPENSTACK, "metrics": [], "infrastructure_provider": {"name": "im"}}
    bodies = json.dumps({"kubeconfig": KUBECONFIG, "openstack": openstack})
    lines = await run_krake(krake_python, "client_probe.py", api.url, bodies)
    calls = [line for line in lines if "call" in line]
    failed = {line["call"]: line["error"] for line in calls if not line["ok"]}
    assert failed == {}
    uncalled = next(line["uncalled"] for line in lines if "uncalled" in line)
    assert uncalled == []
    assert len({line["call"] for line in calls}) >= 70
