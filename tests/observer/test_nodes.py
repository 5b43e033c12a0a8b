"""How the cluster observer sums a cluster's nodes up in its status."""

from __future__ import annotations

from shoal.observer.controller import summarize_nodes


def _node(name: str, ready: bool, pressure: bool = False) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "7500m", "memory": "30Gi", "pods": "110"},
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"},
                {"type": "MemoryPressure", "status": "True" if pressure else "False"},
            ],
        },
    }


def test_summarize_nodes_is_compact() -> None:
    nodes = [_node(f"n-{i}", ready=i % 2 == 0) for i in range(120)]
    entries, ready, pressure = summarize_nodes(nodes)
    assert ready == 60 and not pressure
    assert entries[0]["count"] == 120 and entries[0]["ready"] == 60
    assert entries[0]["capacity"]["cpu"] == 960
    assert entries[0]["allocatable"]["memory"] == 120 * 30 * 2**30
    assert len(entries) == 51
    _, _, pressure = summarize_nodes([_node("n", ready=True, pressure=True)])
    assert pressure
