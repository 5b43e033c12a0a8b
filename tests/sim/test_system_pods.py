"""A simulated cluster asked for ``system_pods`` looks like a fresh kubeadm/minikube cluster:
kube-system runs DNS, a proxy on every node and the control plane's pods, which kubectl
lists, and Shoal's observer counts their requests as it would on a real cluster."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Cluster, ClusterSpec
from shoal.observer.controller import ClusterObserver
from shoal.sim.server import SimServer
from shoal.testing import shipped
from shoal.testing.builders import register
from shoal.testing.wait import wait_for

pytestmark = pytest.mark.integration

CONTROL_PLANE = {"etcd-n-0", "kube-apiserver-n-0", "kube-controller-manager-n-0",
                 "kube-scheduler-n-0", "storage-provisioner"}  # fmt: skip


@pytest.fixture
def sim_options(tmp_path: Path) -> dict[str, Any]:
    """A fresh cluster with the system pods a real one starts with."""
    return dict(clusters=["fresh"], nodes=3, pod_start_delay=0.1, out_dir=tmp_path,
                system_pods=True)


async def kubectl(kubeconfig: Path, *args: str) -> tuple[str, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode(), err.decode()


async def running_pods(kubeconfig: Path) -> dict[str, str]:
    """Pod name -> node of the Running pods of every namespace, as kubectl lists them."""
    out, _ = await kubectl(kubeconfig, "get", "pods", "--all-namespaces", "-o", "json")
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return {
        pod["metadata"]["name"]: pod["spec"].get("nodeName", "")
        for pod in items
        if pod["metadata"]["namespace"] == "kube-system" and pod["status"]["phase"] == "Running"
    }


def by_prefix(pods: dict[str, str], prefix: str) -> list[str]:
    return sorted(node for name, node in pods.items() if name.startswith(prefix))


async def test_kube_system_runs_dns_a_proxy_per_node_and_the_control_plane(
    sim: SimServer, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "fresh.yaml"

    async def settled() -> dict[str, str] | None:
        pods = await running_pods(kubeconfig)
        return pods if len(pods) == 2 + 3 + len(CONTROL_PLANE) else None

    pods = await wait_for(settled, timeout=30, message="kube-system's pods Running")
    assert len(by_prefix(pods, "coredns-")) == 2
    assert by_prefix(pods, "kube-proxy-") == ["n-0", "n-1", "n-2"]
    assert {name: node for name, node in pods.items() if name in CONTROL_PLANE} == dict.fromkeys(
        CONTROL_PLANE, "n-0"
    )
    # the table kubectl prints, header included, as Krake's suite reads it
    table, _ = await kubectl(kubeconfig, "get", "po", "--all-namespaces")
    assert table.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    service, _ = await kubectl(kubeconfig, "get", "service", "kube-dns", "-n", "kube-system",
                               "-o", "jsonpath={.spec.clusterIP}")  # fmt: skip
    assert service == "10.96.0.10"

    # a new node gets its proxy, as a DaemonSet's
    sim.clusters.cluster("fresh").resize(4)

    async def proxied() -> bool:
        return by_prefix(await running_pods(kubeconfig), "kube-proxy-") == [
            "n-0", "n-1", "n-2", "n-3"
        ]  # fmt: skip

    await wait_for(proxied, timeout=30, message="a kube-proxy pod on n-3")


async def test_clusters_are_empty_unless_asked_and_the_admin_api_says_so(
    sim: SimServer, tmp_path: Path
) -> None:
    headers = sim.admin_headers
    async with httpx.AsyncClient(base_url=sim.clusters.url, headers=headers) as admin:
        made = await admin.post("/admin/clusters", json={"name": "bare", "system_pods": False})
        assert made.status_code == 201, made.text
        refused = await admin.post("/admin/clusters", json={"name": "odd", "system_pods": "yes"})
        assert refused.status_code == 422 and "true or false" in refused.text
        assert (await admin.get("/admin/clusters/odd")).status_code == 404
    sim.clusters.write_kubeconfigs(tmp_path)
    out, err = await kubectl(tmp_path / "bare.yaml", "get", "po", "--all-namespaces")
    assert out == "" and "No resources found" in err
    # the fleet's default (on) holds for clusters added later without the option
    sim.clusters.add_cluster("later", nodes=1)
    sim.clusters.write_kubeconfigs(tmp_path)

    async def later() -> bool:
        return len(await running_pods(tmp_path / "later.yaml")) == 2 + 1 + len(CONTROL_PLANE)

    await wait_for(later, timeout=30, message="kube-system's pods on the later cluster")


async def test_the_observer_counts_their_requests_as_a_real_clusters(
    client: ShoalClient, client_of: shipped.Callers, sim: SimServer
) -> None:
    cluster = Cluster(metadata=Metadata(name="fresh", namespace="default"),
                      spec=ClusterSpec(kubeconfig=sim.clusters.kubeconfig("fresh")))  # fmt: skip
    await register(client, cluster)
    observer = ClusterObserver(client_of("cluster-observer"), interval=0.3, timeout=2.0)
    await observer.start()
    try:

        async def requested() -> dict[str, Any] | None:
            summary = (await client.get(Cluster, "fresh", "default")).status.node_summary
            return summary[0] if summary and "requested" in summary[0] else None

        totals = await wait_for(requested, timeout=30, message="the observer sums the pods")
        # kubeadm's requests: coredns 2 x (100m, 70Mi); etcd 100m, 100Mi; the apiserver
        # 250m, the controller manager 200m, the scheduler 100m; ten pods
        memory = 2 * 70 * 2**20 + 100 * 2**20
        assert totals["requested"] == {"cpu": 0.85, "memory": memory, "pods": 10}
        # the room left for tenants: what the nodes hold, less all that; least on the
        # control plane's node (650m, and maybe a DNS pod's 100m)
        room = totals["room"]
        cpu = room["resources"].index("cpu") + 1
        left = [node[cpu] for node in room["nodes"]]
        assert sum(left) == 3 * 8000 - 850 and min(left) in (7250, 7350)
    finally:
        await observer.stop()
