"""Krake 1.0.1's client reads applications placed on several clusters through its own
data classes: ``scheduled_to`` and ``running_on`` name one cluster, as Krake expects."""

from __future__ import annotations

import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, Cluster, ClusterSpec
from shoal.testing import builders
from tests.krake.conftest import run_krake

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_krake_client_reads_multi_cluster_applications(
    open_api: ApiServer, krake_python: str
) -> None:
    # Krake's client sends no token (Krake's deployments authenticate it by a TLS client
    # certificate, or run its API open): an open API, as for Krake's controllers
    async with ShoalClient(open_api.url) as client:
        await _reads(open_api, client, krake_python)


async def _reads(api: ApiServer, client: ShoalClient, krake_python: str) -> None:
    for name in ("a", "b"):
        spec = ClusterSpec(kubeconfig=builders.kubeconfig(name))
        await builders.register(client, Cluster(metadata=Metadata(name=name, namespace="default"),
                                             spec=spec))  # fmt: skip
    placement = {"clusters": 2, "replicas": "divided"}
    app = await client.create(
        Application.model_validate(
            {
                "metadata": {"name": "spread", "namespace": "default"},
                "spec": {"manifest": [builders.deployment("spread", replicas=4)],
                         "placement": placement},
            }
        )
    )
    refs = [{"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": n}
            for n in ("a", "b")]  # fmt: skip
    await client.bind_many(
        [
            {
                "namespace": "default",
                "name": "spread",
                "cluster": refs[0],
                "resource_version": app.metadata.resource_version,
                "placements": [{"cluster": ref, "replicas": 2} for ref in refs],
            }
        ]
    )
    copies = [{"cluster": ref, "replicas": 2, "ready_replicas": 2, "state": "RUNNING"}
              for ref in refs]  # fmt: skip
    await client.patch_status(Application, "spread", "default",
                              {"copies": copies, "running_on": refs[0],
                               "deploy_state": "RUNNING"})  # fmt: skip
    stored = await client.get(Application, "spread", "default")
    assert [(p.replicas, p.ready_replicas) for p in stored.status.placements] == [(2, 2), (2, 2)]

    lines = await run_krake(krake_python, "read_probe.py", api.url, "default")
    assert lines[-1] == {"listed": ["spread"]}
    assert lines[0] == {"name": "spread", "scheduled_to": "a", "running_on": "a",
                        "state": "RUNNING", "manifest": 1}  # fmt: skip
