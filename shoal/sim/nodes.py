"""The node set of a simulated cluster and its capacity bookkeeping.

Every node keeps what is allocated on it (cpu, memory, pod count) up to date
incrementally: a pod is counted once when it is seen bound to the node and
released once when it finishes or goes away, so each pod change costs O(1)
whatever the number of nodes and pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.machinery.resources import amount
from shoal.machinery.types import Obj
from shoal.sim.objects import PodKey, condition_true
from shoal.sim.store import now

KUBELET_VERSION = "v1.32.0-shoal-sim"
MIXED = (("4", "16Gi"), ("8", "32Gi"), ("16", "64Gi"), ("2", "8Gi"), ("32", "128Gi"))
"""(cpu, memory) of the nodes of a mixed cluster, in turn."""
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TAINT_EVERY = 10  # one node in ten of a mixed cluster is tainted
SITES: dict[str, tuple[float, float]] = {
    "vienna": (48.21, 16.37), "berlin": (52.52, 13.40), "paris": (48.86, 2.35),
    "helsinki": (60.17, 24.94), "rome": (41.90, 12.50),
}
"""Where the clusters of a mixed fleet are, in turn (node label ``geo`` names the site)."""


def mixed_site(index: int) -> tuple[str, tuple[float, float]]:
    """The site of the ``index``-th cluster of a mixed fleet."""
    name = list(SITES)[index % len(SITES)]
    return name, SITES[name]


def node_conditions(not_ready: bool = False, memory_pressure: bool = False) -> list[Obj]:
    """The conditions a kubelet reports, healthy unless a fault says otherwise."""
    ts = now()

    def cond(ctype: str, bad: bool, reasons: tuple[str, str], messages: tuple[str, str]) -> Obj:
        status = bad if ctype != "Ready" else not bad
        return {
            "type": ctype,
            "status": "True" if status else "False",
            "reason": reasons[bad],
            "message": messages[bad],
            "lastHeartbeatTime": ts,
            "lastTransitionTime": ts,
        }

    return [
        cond("MemoryPressure", memory_pressure,
             ("KubeletHasSufficientMemory", "KubeletHasInsufficientMemory"),
             ("kubelet has sufficient memory available",
              "kubelet has insufficient memory available")),
        cond("DiskPressure", False, ("KubeletHasNoDiskPressure", ""),
             ("kubelet has no disk pressure", "")),
        cond("PIDPressure", False, ("KubeletHasSufficientPID", ""),
             ("kubelet has sufficient PID available", "")),
        cond("Ready", not_ready, ("KubeletReady", "KubeletNotReady"),
             ("kubelet is posting ready status", "node is not ready (simulated fault)")),
    ]


@dataclass
class NodeTemplate:
    """What every node of a cluster looks like: capacity, labels, region and zones."""

    cluster: str
    cpu: str = "8"
    memory: str = "32Gi"
    max_pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    region: str = ""
    zones: int = 3
    mixed: bool = False  # node sizes from MIXED, a tainted node in TAINT_EVERY
    site: tuple[float, float] | None = None  # nodes labelled near it (shoal.dev/lat-long)
    _ips: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.region = self.region or f"{self.cluster}-region"
        self.zones = max(1, self.zones)

    def node(self, name: str, index: int) -> Obj:
        """A Ready node object; ``index`` picks its zone (round robin)."""
        zone = f"{self.region}-{chr(ord('a') + index % self.zones)}"
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "sim",
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": self.region,
            "type": "shoal-sim",
            **self.labels,
        }
        cpu, memory = MIXED[index % len(MIXED)] if self.mixed else (self.cpu, self.memory)
        if self.site is not None:  # spread over about 20 km around the site
            lat = self.site[0] + (index * 7919 % 200 - 100) / 1000
            lon = self.site[1] + (index * 104729 % 200 - 100) / 1000
            labels["shoal.dev/lat-long"] = f"{lat:.3f}_{lon:.3f}"
        cap = {
            "cpu": cpu,
            "memory": memory,
            "pods": str(self.max_pods),
            "ephemeral-storage": "100Gi",
        }
        self._ips += 1
        ip = f"10.{(self._ips >> 16) & 255}.{(self._ips >> 8) & 255}.{self._ips & 255}"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", "shoal.dev/sim": "true"},
            },
            "spec": {"taints": [dict(TAINT)]} if self.mixed and index % TAINT_EVERY == 0 else {},
            "status": {
                "capacity": cap,
                "allocatable": dict(cap),
                "conditions": node_conditions(),
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "shoal-sim://1.0",
                    "osImage": "shoal sim",
                    "kernelVersion": "6.0.0-sim",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
                "phase": "Running",
            },
        }


@dataclass
class NodeInfo:
    """Scheduler view of a node: allocatable, what is allocated, whether it takes new pods."""

    cpu: int = 0
    memory: int = 0
    pods: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    schedulable: bool = False
    used_cpu: int = 0
    used_memory: int = 0
    used_pods: int = 0
    pod_keys: set[PodKey] = field(default_factory=set)

    def fits(self, cpu: int, memory: int) -> bool:
        return (
            self.schedulable
            and self.used_pods < self.pods
            and self.used_cpu + cpu <= self.cpu
            and self.used_memory + memory <= self.memory
        )

    def matches(self, selector: dict[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())

    def add(self, key: PodKey, cpu: int, memory: int) -> None:
        self.used_cpu += cpu
        self.used_memory += memory
        self.used_pods += 1
        self.pod_keys.add(key)

    def remove(self, key: PodKey, cpu: int, memory: int) -> None:
        self.used_cpu -= cpu
        self.used_memory -= memory
        self.used_pods -= 1
        self.pod_keys.discard(key)


def schedulable(node: Obj) -> bool:
    """Ready, without memory pressure, not cordoned, no NoSchedule/NoExecute taint."""
    spec = node.get("spec", {})
    if spec.get("unschedulable") or condition_true(node, "MemoryPressure"):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or ()):
        return False
    return condition_true(node, "Ready")


class NodeSet:
    """The nodes of one cluster, in creation order, and the pods placed on each."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.order: list[str] = []
        # pod → (node, cpu, memory) as counted; also for pods bound to unknown nodes
        self.placements: dict[PodKey, tuple[str, int, int]] = {}
        self._waiting: dict[str, set[PodKey]] = {}  # unknown node → pods bound to it

    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, name: str) -> NodeInfo | None:
        return self.nodes.get(name)

    def refresh(self, node: Obj) -> bool:
        """Take in a node's new state; True if it just became schedulable."""
        name = node["metadata"]["name"]
        status = node.get("status", {})
        alloc = status.get("allocatable") or status.get("capacity") or {}
        info = self.nodes.get(name)
        if info is None:
            info = self.nodes[name] = NodeInfo()
            self.order.append(name)
            for key in self._waiting.pop(name, ()):
                _, cpu, mem = self.placements[key]
                info.add(key, cpu, mem)
        was = info.schedulable
        info.cpu = amount("cpu", alloc.get("cpu", "0"))
        info.memory = amount("memory", alloc.get("memory", "0"))
        info.pods = amount("pods", alloc.get("pods", "110"))
        info.labels = dict(node["metadata"].get("labels") or {})
        info.schedulable = schedulable(node)
        return info.schedulable and not was

    def remove(self, name: str) -> set[PodKey] | None:
        """Forget a node; returns the pods that were placed on it (None if unknown)."""
        info = self.nodes.pop(name, None)
        if name in self.order:
            self.order.remove(name)
        if info is None:
            return None
        for key in info.pod_keys:
            self.placements.pop(key, None)
        return info.pod_keys

    # -- capacity bookkeeping ----------------------------------------------------

    def place(self, key: PodKey, node: str, cpu: int, memory: int) -> None:
        """Count a pod on ``node`` (again only if its node or requests changed)."""
        placed = (node, cpu, memory)
        if self.placements.get(key) == placed:
            return
        self.release(key)
        self.placements[key] = placed
        info = self.nodes.get(node)
        if info is not None:
            info.add(key, cpu, memory)
        else:
            self._waiting.setdefault(node, set()).add(key)

    def release(self, key: PodKey) -> bool:
        """Stop counting a pod; True if it was counted."""
        placed = self.placements.pop(key, None)
        if placed is None:
            return False
        node, cpu, memory = placed
        info = self.nodes.get(node)
        if info is not None:
            info.remove(key, cpu, memory)
        else:
            waiting = self._waiting.get(node, set())
            waiting.discard(key)
            if not waiting:
                self._waiting.pop(node, None)
        return True

    def allocated(self, name: str) -> tuple[int, int, int]:
        """(millicores, bytes, pods) allocated on a node."""
        info = self.nodes[name]
        return info.used_cpu, info.used_memory, info.used_pods
