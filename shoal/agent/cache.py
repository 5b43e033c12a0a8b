"""The node cache: every node of the member cluster and what its pods request.

Fed by the list+watch in ``shoal.agent.sync``; each pod event costs O(1) (the
pod's old contribution leaves its node, the new one arrives). A pod counts
from the moment it is bound (``spec.nodeName``) until it finishes or is gone,
so pods that are bound but not yet running are never forgotten.

Reservations are the agent's own commits in flight: they count like pods and
live only in memory, so an agent that restarts rebuilds its cache from the
cluster alone and cannot keep a phantom reservation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.agent.pod import UID_ANNOTATION
from shoal.machinery.resources import Amounts, add, amounts, pod_requests
from shoal.machinery.types import Obj

TERMINAL = ("Succeeded", "Failed")
HARD_EFFECTS = ("NoSchedule", "NoExecute")  # taint effects that keep a pod off its node


@dataclass(slots=True)
class NodeInfo:
    name: str
    allocatable: Amounts
    labels: dict[str, str]
    taints: list[Obj]
    ready: bool
    unschedulable: bool
    requested: Amounts  # shared with NodeCache.requested[name]

    def available(self) -> Amounts:
        return {k: v - self.requested.get(k, 0) for k, v in self.allocatable.items()}


@dataclass(slots=True)
class Placed:
    """One pod's (or reservation's) contribution to a node."""

    node: str
    requests: Amounts
    uid: str


def _ready(node: Obj) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _placement(pod: Obj) -> Placed | None:
    """Where a pod takes resources, or None when it takes none (unbound, finished, no node)."""
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in TERMINAL:
        return None
    meta = pod.get("metadata") or {}
    uid = (meta.get("annotations") or {}).get(UID_ANNOTATION, "")
    return Placed(node, pod_requests(spec), uid)


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _version(obj: Obj) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


@dataclass
class NodeCache:
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    names: tuple[str, ...] = ()  # replaced, never mutated: a sample may hold the old one
    requested: dict[str, Amounts] = field(default_factory=dict)
    pods: dict[str, Placed] = field(default_factory=dict)
    reservations: dict[str, Placed] = field(default_factory=dict)
    uids: dict[str, str] = field(default_factory=dict)  # shoal pod uid → pod key
    pod_version: int = 0  # resourceVersion the pod watch has reached
    version: int = 0  # moves on every change of a node or a full list (tables rebuild)
    dirty: set[str] = field(default_factory=set)  # nodes whose requests changed since a look

    # nodes -------------------------------------------------------------------------

    def set_node(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        spec = obj.get("spec") or {}
        self.nodes[name] = NodeInfo(
            name=name,
            allocatable=amounts((obj.get("status") or {}).get("allocatable")),
            labels=dict(meta.get("labels") or {}),
            taints=list(spec.get("taints") or ()),
            ready=_ready(obj),
            unschedulable=bool(spec.get("unschedulable")),
            requested=self.requested.setdefault(name, {}),
        )
        if len(self.nodes) != len(self.names):
            self.names = tuple(self.nodes)
        self.version += 1

    def delete_node(self, obj: Obj) -> None:
        if self.nodes.pop(str((obj.get("metadata") or {}).get("name")), None) is not None:
            self.names = tuple(self.nodes)
            self.version += 1

    def replace_nodes(self, items: list[Obj]) -> None:
        self.nodes.clear()
        for item in items:
            self.set_node(item)
        self.names = tuple(self.nodes)

    # pods --------------------------------------------------------------------------

    def set_pod(self, obj: Obj) -> None:
        """A pod event from the watch (or a list)."""
        self._place(obj)
        self._seen(obj)

    def _place(self, obj: Obj) -> None:
        key = _key(obj)
        self._forget(key)
        placed = _placement(obj)
        if placed is None:
            return
        self._drop_reservation(key)  # the pod itself counts from now on
        self.pods[key] = placed
        add(self.requested.setdefault(placed.node, {}), placed.requests)
        self.dirty.add(placed.node)
        if placed.uid:
            self.uids[placed.uid] = key

    def _seen(self, obj: Obj) -> None:
        version = _version(obj)
        if version is not None:
            self.pod_version = max(self.pod_version, version)

    def delete_pod(self, obj: Obj) -> None:
        self._forget(_key(obj))
        self._seen(obj)

    def replace_pods(self, items: list[Obj], version: int | None) -> None:
        """A fresh list: the pods it holds, plus the reservations still in flight."""
        self.pods.clear()
        self.uids.clear()
        self.requested.clear()
        for info in self.nodes.values():
            info.requested = self.requested.setdefault(info.name, {})
        for placed in self.reservations.values():
            add(self.requested.setdefault(placed.node, {}), placed.requests)
        for item in items:
            self.set_pod(item)
        self.pod_version = version or self.pod_version
        self.version += 1

    def _forget(self, key: str) -> None:
        old = self.pods.pop(key, None)
        if old is not None:
            add(self.requested.setdefault(old.node, {}), old.requests, -1)
            self.dirty.add(old.node)
            if self.uids.get(old.uid) == key:
                del self.uids[old.uid]

    # reservations (commits in flight) ----------------------------------------------

    def reserve(self, key: str, node: str, requests: Amounts, uid: str) -> None:
        self.reservations[key] = Placed(node, dict(requests), uid)
        add(self.requested.setdefault(node, {}), requests)
        self.dirty.add(node)

    def release(self, key: str) -> None:
        self._drop_reservation(key)

    def record(self, created: Obj) -> None:
        """The create succeeded: the pod replaces its reservation.

        Unless the watch was first: it has then counted the pod, or seen it go.
        Only the watch moves ``pod_version``, so an older create recorded late
        is still counted until its own event arrives.
        """
        key = _key(created)
        self._drop_reservation(key)
        version = _version(created)
        if key not in self.pods and (version is None or version > self.pod_version):
            self._place(created)

    def _drop_reservation(self, key: str) -> None:
        placed = self.reservations.pop(key, None)
        if placed is not None:
            add(self.requested.setdefault(placed.node, {}), placed.requests, -1)
            self.dirty.add(placed.node)

    def find(self, uids: list[str]) -> dict[str, tuple[str, Placed, bool]]:
        """For each of ``uids`` with a pod made or being made here: its key, its placement and
        whether its commit is still in flight."""
        found: dict[str, tuple[str, Placed, bool]] = {}
        wanted = set(uids)
        for uid in wanted:
            key = self.uids.get(uid)
            placed = self.pods.get(key) if key else None
            if key is not None and placed is not None:
                found[uid] = (key, placed, False)
        if len(found) < len(wanted):
            for key, placed in self.reservations.items():
                if placed.uid in wanted and placed.uid not in found:
                    found[placed.uid] = (key, placed, True)
        return found

    def made(self) -> dict[str, tuple[str, Placed, bool]]:
        """Every pod made here for a uid (the pods the fleet scheduler placed), as ``find``."""
        found = {uid: (key, self.pods[key], False) for uid, key in self.uids.items()
                 if key in self.pods}
        for key, placed in self.reservations.items():
            if placed.uid:
                found.setdefault(placed.uid, (key, placed, True))
        return found

    def committed(self, uid: str) -> Placed | None:
        """The pod already made for ``uid`` (the member cluster's name check covers commits
        in flight)."""
        key = self.uids.get(uid)
        return self.pods.get(key) if key else None

    def stats(self) -> dict[str, int]:
        return {
            "nodes": len(self.nodes),
            "pods": len(self.pods),
            "reservations": len(self.reservations),
        }
