"""Node capacity bookkeeping stays exact as pods are bound, finish and are deleted."""

from __future__ import annotations

from typing import Any

from shoal.sim.cluster import SimCluster
from shoal.sim.objects import PODS, pod_finished, pod_requests
from tests.util import wait_for


def pod(name: str, cpu: str, memory: str, scheduler: str = "agent",
        run_seconds: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if run_seconds is not None:
        meta["annotations"] = {"sim.shoal.dev/run-seconds": run_seconds}
    return {"metadata": meta, "spec": {"schedulerName": scheduler, "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


def assert_exact(cluster: SimCluster) -> None:
    """Each node's allocated counts equal the sums over its live pods, recomputed from scratch."""
    expected = {name: [0, 0, 0] for name in cluster.nodes.nodes}
    for p in cluster.store.list(PODS):
        node = p["spec"].get("nodeName")
        if node in expected and not pod_finished(p):
            cpu, mem = pod_requests(p)
            expected[node][0] += cpu
            expected[node][1] += mem
            expected[node][2] += 1
    actual = {name: list(cluster.nodes.allocated(name)) for name in cluster.nodes.nodes}
    assert actual == expected


async def test_allocated_follows_bind_finish_delete() -> None:
    cluster = SimCluster("cap", nodes=3, cpu="4", memory="8Gi", pod_start_delay=0.01)
    cluster.start()
    rt = cluster.rt(PODS)
    try:
        for i in range(6):
            cluster.create(rt, pod(f"a-{i}", "500m", "1Gi"), "default")
        assert_exact(cluster)
        assert cluster.nodes.allocated("n-0") == (0, 0, 0)
        for i in range(6):
            cluster.bind("default", f"a-{i}", f"n-{i % 2}")
            assert_exact(cluster)
        assert cluster.nodes.allocated("n-0") == (1500, 3 * 2**30, 3)
        cluster.create(rt, pod("short", "1", "1Gi", run_seconds="0.05"), "default")
        cluster.bind("default", "short", "n-2")
        assert cluster.nodes.allocated("n-2") == (1000, 2**30, 1)
        for i in range(3):  # the default scheduler places these
            cluster.create(rt, pod(f"s-{i}", "250m", "256Mi", "default-scheduler"), "default")
        await wait_for(lambda: all(p["spec"].get("nodeName") for p in cluster.store.list(PODS)))
        await wait_for(lambda: cluster.store.get(PODS, "default", "short")["status"].get(
            "phase") == "Succeeded")
        assert_exact(cluster)
        for name in ("a-0", "a-1", "s-0"):
            cluster.delete(rt, "default", name)
            assert_exact(cluster)
        cluster.delete(cluster.rt("/nodes"), "", "n-1")  # its pods go with it
        assert_exact(cluster)
        assert cluster.nodes.placements.keys() == {
            (p["metadata"]["namespace"], p["metadata"]["name"])
            for p in cluster.store.list(PODS) if not pod_finished(p)}
    finally:
        await cluster.stop()


async def test_pod_bound_before_its_node_exists_is_counted_when_it_appears() -> None:
    cluster = SimCluster("late", nodes=1, pod_start_delay=60)
    cluster.start()
    try:
        cluster.create(cluster.rt(PODS), {**pod("early", "1", "1Gi"),
                                          "spec": {**pod("early", "1", "1Gi")["spec"],
                                                   "nodeName": "n-9"}}, "default")
        cluster.add_node("n-9")
        assert cluster.nodes.allocated("n-9") == (1000, 2**30, 1)
        assert_exact(cluster)
    finally:
        await cluster.stop()
