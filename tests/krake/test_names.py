"""Krake 1.0.1's client, unchanged, with Krake's names on the API as ``shoal up`` secures it.

Its CLI's default namespace is ``system:admin``: a tenant of that namespace registers a
cluster and creates an application there; the Deployment, which names no namespace,
lands in the namespace of the cluster's kubeconfig context (``default``, as minikube
writes it), read back through the member cluster's own API. The administrator creates a
Role without rules and a provider named ``GlobalInfrastructureProvider_instance``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shoal.api.server import ApiServer
from shoal.client.kube import KubeClients
from shoal.client.rest import ShoalClient
from shoal.copies.owners import Owner, owner_of
from shoal.kube.controller import KubeController
from shoal.model.base import ResourceRef
from shoal.model.core import Role
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.testing import shipped
from shoal.testing.shipped import Callers
from shoal.testing.sim import running_sim
from shoal.testing.wait import wait_for
from tests.conftest import Tenant
from tests.krake.conftest import run_krake

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NS = "system:admin"


def _calls(lines: list[dict[str, Any]]) -> dict[str, Any]:
    failed = {line["call"]: line.get("error") for line in lines if not line["ok"]}
    assert failed == {}
    return {line["call"]: line["result"] for line in lines}


async def test_krake_client_works_in_system_admin_as_a_tenant(
    api: ApiServer,
    client: ShoalClient,
    client_of: Callers,
    tenant: Tenant,
    krake_python: str,
    tenants_may_reach_loopback: None,
) -> None:
    user = shipped.TENANTS[0]
    await tenant(user, NS)
    async with running_sim(clusters=["minikube"], nodes=1, pod_start_delay=0.1) as sim:
        kubeconfig = sim.clusters.kubeconfig("minikube")
        assert kubeconfig["contexts"][0]["context"]["namespace"] == "default"  # as minikube's
        lines = await run_krake(krake_python, "names_probe.py", api.url, shipped.token(user),
                                "tenant", json.dumps(kubeconfig))  # fmt: skip
        results = _calls(lines)
        assert results["create_cluster"] == NS and results["create_application"] == NS
        assert results["list_applications"] == ["echo-demo"]
        assert results["read_application"] == "echo-demo"
        controller = KubeController(client_of("kube-controller"), poll_interval=0.2, timeout=2.0)
        await controller.start()
        members = KubeClients(timeout=2.0)
        try:
            app = await client.get(Application, "echo-demo", NS)
            ref = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="minikube")
            await client.bind(app, ref)  # as the scheduler would: the tenant's only cluster

            async def running() -> Application | None:
                found = await client.get(Application, "echo-demo", NS)
                return found if found.status.state is ApplicationState.RUNNING else None

            app = await wait_for(running, timeout=60, message="echo-demo RUNNING")
            assert app.status.kube_namespaces == {"minikube": "default"}
            member = await members.get(await client.get(Cluster, "minikube", NS))
            live = await member.request(
                "GET", "/apis/apps/v1/namespaces/default/deployments/echo-demo"
            )
            assert live["status"].get("readyReplicas") == 1
            assert owner_of(live) == Owner(NS, "echo-demo", app.metadata.uid or "")
        finally:
            await members.close()
            await controller.stop()


async def test_krake_client_creates_objects_with_krake_names(
    api: ApiServer, client: ShoalClient, krake_python: str
) -> None:
    lines = await run_krake(krake_python, "names_probe.py", api.url,
                            shipped.token(shipped.ADMIN), "admin")  # fmt: skip
    results = _calls(lines)
    assert results["create_role"] == []
    assert results["read_global_infrastructure_provider"] == (
        "GlobalInfrastructureProvider_instance"
    )
    assert (await client.get(Role, "empty")).rules == []
