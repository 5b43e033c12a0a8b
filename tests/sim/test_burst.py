"""What keeps the simulator fast under a burst of Deployments stays correct: apply bodies read
as JSON or YAML alike, stored objects copied deeply, and each workload reconciled once per
change of its own or of what it owns, not again after writing its own status."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import yaml

from shoal.sim.cluster import SimCluster
from shoal.sim.controllers.base import Controllers
from shoal.sim.objects import DEPLOYMENTS, PODS, REPLICASETS
from shoal.sim.rest import load_yaml
from shoal.sim.store import clone
from shoal.testing.builders import deployment
from tests.util import wait_for


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"kind": "ConfigMap", "data": {"x": "1"}}', {"kind": "ConfigMap", "data": {"x": "1"}}),
        (b"  [1, 2]", [1, 2]),
        (b"{kind: ConfigMap, data: {x: '1'}}", {"kind": "ConfigMap", "data": {"x": "1"}}),
        (b"kind: ConfigMap\ndata:\n  x: '1'\n", {"kind": "ConfigMap", "data": {"x": "1"}}),
    ],
)
def test_apply_body_json_or_yaml(body: bytes, expected: Any) -> None:
    """JSON takes the fast path; a YAML flow mapping that is not JSON still parses as YAML."""
    assert load_yaml(body) == expected


def test_apply_body_invalid() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml(b"{kind: [unclosed")


def test_clone_is_deep() -> None:
    obj = {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c"}]}, "n": 1}
    copied = clone(obj)
    copied["metadata"]["labels"]["a"] = "2"
    copied["spec"]["containers"][0]["name"] = "d"
    copied["spec"]["containers"].append({})
    assert obj == {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c"}]},
                   "n": 1}


async def test_burst_reconciles_each_workload_three_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """50 Deployments become ready; each Deployment and ReplicaSet is reconciled three times
    (created, its child created, its child ready), not again after its own status write."""
    passes: Counter[str] = Counter()
    original = Controllers.reconcile

    def counted(self: Controllers, key: str, fn: Any, ns: str, name: str) -> None:
        passes[key] += 1
        original(self, key, fn, ns, name)

    monkeypatch.setattr(Controllers, "reconcile", counted)
    cluster = SimCluster("burst", nodes=5, pod_start_delay=0.05)
    cluster.start()
    try:
        n = 50
        for i in range(n):
            obj = deployment(f"d{i}", requests={"cpu": "10m"})
            obj["metadata"]["namespace"] = "default"
            cluster.create(cluster.rt(DEPLOYMENTS), obj)

        def ready() -> bool:
            return all(
                (d.get("status") or {}).get("readyReplicas") == 1
                for d in cluster.store.list(DEPLOYMENTS)
            )

        await wait_for(ready, timeout=20, message="every Deployment ready")
        assert len(cluster.store.list(REPLICASETS)) == n
        assert len(cluster.store.list(PODS)) == n
        assert passes[DEPLOYMENTS] <= 3 * n, passes
        assert passes[REPLICASETS] <= 3 * n, passes
    finally:
        await cluster.stop()
