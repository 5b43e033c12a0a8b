"""Room counted node by node, and a short placement, as a tenant meets them under ``shoal up``'s
security: alice registers her own sim cluster (two 8-cpu nodes) in namespace ``a`` and reads
everything back with her own token; the control plane runs with its own tokens.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from shoal.client.kube import KubeClients
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Cluster, ClusterSpec
from shoal.testing import builders
from shoal.testing.sim import running_sim
from tests.conftest import ClientOf, running_control_plane
from tests.security.conftest import TOKENS, Secured
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NS = "a"
APPS = f"/kubernetes/namespaces/{NS}/applications"


@contextlib.asynccontextmanager
async def components(url: str) -> AsyncIterator[ClientOf]:
    """Clients for the observer, the kube controller and the scheduler, each with a token of
    the API."""
    admin = TOKENS["admin"]  # the suite's tokens name no scheduler nor observer identity
    async with (
        ShoalClient(url, token=admin) as observing,
        ShoalClient(url, token=TOKENS["system:kube-controller"]) as deploying,
        ShoalClient(url, token=admin) as scheduling,
    ):
        clients = {"cluster-observer": observing, "kube-controller": deploying,
                   "scheduler": scheduling}  # fmt: skip
        yield clients.__getitem__


def deployment_app(name: str, cpu: str, placement: dict[str, Any] | None = None) -> dict[str, Any]:
    deployment = builders.deployment(name, "nginx:1", replicas=2)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"manifest": [deployment]}
    if placement is not None:
        spec["placement"] = placement
    return {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}  # fmt: skip


async def _status(alice: httpx.AsyncClient, name: str) -> dict[str, Any]:
    answer = await alice.get(f"{APPS}/{name}")
    assert answer.status_code == 200, answer.text
    status: dict[str, Any] = answer.json()["status"]
    return status


async def test_a_tenant_sees_why_an_application_is_not_placed_or_runs_short(
    secured: Secured,
) -> None:
    alice = secured["alice"]
    async with running_sim(clusters=[], nodes=2, pod_start_delay=0.2) as sim:
        sim.clusters.add_cluster("alice-1", 2, cpu="8")
        cluster = Cluster(
            metadata=Metadata(name="alice-1", namespace=NS, labels={"location": "DE"}),
            spec=ClusterSpec(kubeconfig=sim.kubeconfig("alice-1")),
        ).model_dump(mode="json", exclude_none=True)
        created = await alice.post(f"/kubernetes/namespaces/{NS}/clusters", json=cluster)
        assert created.status_code == 200, created.text
        async with components(secured.server.url) as client_of, running_control_plane(client_of):
            # a pod of 30 cpus on 8-cpu nodes: PENDING, saying why, nothing deployed
            assert (await alice.post(APPS, json=deployment_app("huge", "30"))).status_code == 200
            reason = "it requests cpu 30, the largest node has cpu 8 left"

            async def pending() -> dict[str, Any] | None:
                status = await _status(alice, "huge")
                why = (status.get("reason") or {}).get("message") or ""
                return status if status["state"] == "PENDING" and reason in why else None

            status = await wait_for(pending, timeout=20, message="huge PENDING with the reason")
            assert status["scheduled_to"] is None
            dry = await alice.post(
                f"/scheduling/namespaces/{NS}/dryrun", json=deployment_app("huge", "30")
            )
            assert dry.status_code == 200 and reason in dry.json()["summary"]

            async def told() -> bool:
                events = (await alice.get(f"/core/namespaces/{NS}/events")).json()["items"]
                return any(
                    e["reason"] == "Unschedulable" and reason in e["message"] for e in events
                )

            await wait_for(told, timeout=10, message="alice reads the Unschedulable event")

            # a spread_by label no cluster has: RUNNING where it can, Degraded, saying why
            typo = {"clusters": 2, "spread_by": "regoin", "replicas": "divided"}
            answer = await alice.post(APPS, json=deployment_app("short", "1", typo))
            assert answer.status_code == 200
            message = "on 1 of 2 clusters asked for: no cluster has the spread_by label 'regoin'"

            async def degraded() -> dict[str, Any] | None:
                status = await _status(alice, "short")
                found = [c for c in status.get("conditions") or [] if c["type"] == "Degraded"]
                running = status["state"] == "RUNNING"
                return found[0] if running and found and found[0]["message"] == message else None

            condition = await wait_for(degraded, timeout=30, message="short RUNNING, Degraded")
            assert condition["reason"] == "PlacementShort"

            # what runs on alice's cluster: the short one, never the huge one
            clients = KubeClients(timeout=2.0)
            try:
                member = await clients.get(Cluster.model_validate(cluster))
                listed = await member.request("GET", "/apis/apps/v1/deployments")
            finally:
                await clients.close()
            names = sorted(d["metadata"]["name"] for d in listed["items"])
            assert "huge" not in names and "short" in names
