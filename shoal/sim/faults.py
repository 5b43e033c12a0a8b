"""Injected faults: an unreachable or slow cluster; nodes NotReady, under pressure or gone.

A node fault changes what the node reports (conditions, the matching
``node.kubernetes.io/*`` NoSchedule taints); the scheduler, kubelet and
controllers react to that change as they would on a real cluster. A removed node
is deleted (its pods with it) and remembered, so restoring it brings it back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from shoal.machinery.types import Obj
from shoal.sim.nodes import NodeSet, node_conditions
from shoal.sim.objects import NODES
from shoal.sim.verbs import Verbs


@dataclass
class NodeFault:
    not_ready: bool = False
    memory_pressure: bool = False
    removed: bool = False

    def any(self) -> bool:
        return self.not_ready or self.memory_pressure or self.removed


def _taints(node: Obj, fault: NodeFault) -> list[Obj]:
    taints = [t for t in node["spec"].get("taints") or ()
              if not t.get("key", "").startswith("node.kubernetes.io/")]
    if fault.not_ready:
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    if fault.memory_pressure:
        taints.append({"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"})
    return taints


class Faults:
    def __init__(self, api: Verbs, nodes: NodeSet,
                 new_node: Callable[[str], Obj]) -> None:
        self.api = api
        self.nodes = nodes
        self.new_node = new_node
        self.unreachable = False
        # Seconds before each answer of the cluster's Kubernetes API: a cluster behind a slow
        # link (an edge site), whose requests are all in flight at once under a burst.
        self.latency = 0.0
        self.node_faults: dict[str, NodeFault] = {}
        self.removed_nodes: dict[str, Obj] = {}

    def node_ready(self, node: str) -> bool:
        fault = self.node_faults.get(node)
        return not (fault and fault.not_ready)

    def set_unreachable(self, unreachable: bool) -> None:
        self.unreachable = unreachable
        if unreachable:
            self.api.store.close_watches()

    def set_node_fault(
        self,
        node: str,
        not_ready: bool | None = None,
        memory_pressure: bool | None = None,
        removed: bool | None = None,
    ) -> None:
        """Change the simulated health of one node; None leaves that aspect unchanged."""
        if node not in self.nodes and node not in self.removed_nodes:
            raise KeyError(node)
        fault = self.node_faults.get(node) or NodeFault()
        if not_ready is not None:
            fault.not_ready = not_ready
        if memory_pressure is not None:
            fault.memory_pressure = memory_pressure
        if removed is not None and removed != fault.removed:
            fault.removed = removed
            if removed:
                self._remove(node)
            else:
                self._restore(node)
        if fault.any():
            self.node_faults[node] = fault
        else:
            self.node_faults.pop(node, None)
        obj = None if fault.removed else self.api.store.get(NODES, "", node)
        if obj is None:
            return

        def report(new: Obj) -> None:
            new["status"]["conditions"] = node_conditions(fault.not_ready, fault.memory_pressure)
            taints = _taints(new, fault)
            if taints:
                new["spec"]["taints"] = taints
            else:
                new["spec"].pop("taints", None)

        self.api.store.modify(NODES, obj, report)

    def _remove(self, node: str) -> None:
        obj = self.api.store.get(NODES, "", node)
        if obj is not None:
            self.removed_nodes[node] = obj
            self.api.delete(self.api.store.rt(NODES), "", node)

    def _restore(self, node: str) -> None:
        saved = self.removed_nodes.pop(node, None)
        self.api.create(self.api.store.rt(NODES),
                        copy.deepcopy(saved) if saved else self.new_node(node))

    def clear(self, node: str | None = None) -> None:
        if node is None:
            self.set_unreachable(False)
            self.latency = 0.0
            nodes = list(self.node_faults)
        else:
            nodes = [node] if node in self.node_faults else []
        for n in nodes:
            self.set_node_fault(n, not_ready=False, memory_pressure=False, removed=False)

    def report(self) -> Obj:
        return {
            "unreachable": self.unreachable,
            "latency": self.latency,
            "nodes": {
                n: {k: v for k, v in vars(f).items() if v}
                for n, f in sorted(self.node_faults.items())
            },
        }
