"""Pod placement (the scheduler's part): bind pending pods to nodes that have room.

First fit from a rotating start, so pods spread over nodes. A pod nothing fits
is marked ``PodScheduled=False, reason=Unschedulable`` and parked; parked pods
are retried when room appears (a pod is released, a node becomes schedulable).
Pods of another ``schedulerName`` wait for a binding.
"""

from __future__ import annotations

from shoal.machinery.quantity import format_bytes, format_cpu
from shoal.machinery.types import Obj
from shoal.machinery.workqueue import WorkQueue
from shoal.sim.nodes import NodeSet
from shoal.sim.objects import PODS, PodKey, condition, pod_requests
from shoal.sim.store import ApiError, Store, not_found

DEFAULT_SCHEDULERS = ("", "default-scheduler")
#: The work item that queues the parked pods again (once, however much room freed).
RETRY_PARKED = ("retry-parked",)


def _default_scheduler(pod: Obj) -> bool:
    return pod["spec"].get("schedulerName", "default-scheduler") in DEFAULT_SCHEDULERS


def _set_scheduled(pod: Obj, status: str, reason: str = "", message: str = "") -> None:
    conds = [c for c in pod["status"].get("conditions") or () if c["type"] != "PodScheduled"]
    conds.append(condition("PodScheduled", status, reason, message))
    pod["status"]["conditions"] = conds


class Scheduler:
    def __init__(self, store: Store, nodes: NodeSet, queue: WorkQueue[tuple[str, ...]]) -> None:
        self.store = store
        self.nodes = nodes
        self.queue = queue
        self.unschedulable: set[PodKey] = set()
        self._retry = False
        self._next = 0  # where the next first-fit search starts

    # -- events --------------------------------------------------------------------

    def pod_unbound(self, key: PodKey, pod: Obj, deleted: bool) -> None:
        """A pod that takes no room: queue it for placement if it waits for us."""
        if deleted:
            self.unschedulable.discard(key)
        elif (not pod.get("spec", {}).get("nodeName")
              and pod.get("status", {}).get("phase") == "Pending"
              and _default_scheduler(pod) and key not in self.unschedulable):
            self.queue.add(("schedule", *key))

    def room_freed(self) -> None:
        """Capacity appeared (a pod released, a node schedulable): retry parked pods."""
        if self.unschedulable:
            self._retry = True
            self.queue.add(RETRY_PARKED)

    def retry_parked(self) -> bool:
        """Queue the parked pods again once a retry is due (its turn in the queue comes
        after the work queued before it); True if any were queued."""
        if not self._retry:
            return False
        self._retry = False
        for ns, name in sorted(self.unschedulable):
            self.queue.add(("schedule", ns, name))
        retried = bool(self.unschedulable)
        self.unschedulable.clear()
        return retried

    # -- placement -----------------------------------------------------------------

    def schedule(self, ns: str, name: str) -> None:
        pod = self.store.get(PODS, ns, name)
        if pod is None or pod["spec"].get("nodeName") or pod["status"].get("phase") != "Pending":
            return
        if not _default_scheduler(pod):
            return
        cpu, mem = pod_requests(pod)
        selector = pod["spec"].get("nodeSelector") or {}
        order = self.nodes.order
        n = len(order)
        for i in range(n):
            node = order[(self._next + i) % n]
            info = self.nodes.nodes[node]
            if info.fits(cpu, mem) and (not selector or info.matches(selector)):
                self._next = (self._next + i + 1) % n
                self._bind(pod, node)
                return
        self.unschedulable.add((ns, name))
        msg = (f"0/{n} nodes are available: insufficient resources or no node matches "
               f"(requests cpu={format_cpu(cpu)}, memory={format_bytes(mem)}).")
        for c in pod["status"].get("conditions") or ():
            if c["type"] == "PodScheduled" and c.get("message") == msg:
                return
        self.store.modify(PODS, pod, lambda new: _set_scheduled(
            new, "False", "Unschedulable", msg))

    def bind(self, namespace: str, name: str, node: str) -> None:
        """The ``pods/binding`` subresource: another scheduler placed the pod."""
        pod = self.store.get(PODS, namespace, name)
        if pod is None:
            raise not_found(self.store.rt(PODS), name)
        if pod["spec"].get("nodeName"):
            raise ApiError(409, "Conflict",
                           f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        if node not in self.nodes:
            raise ApiError(404, "NotFound", f'nodes "{node}" not found')
        self._bind(pod, node)

    def _bind(self, pod: Obj, node: str) -> None:
        def place(new: Obj) -> None:
            new["spec"]["nodeName"] = node
            _set_scheduled(new, "True")

        self.unschedulable.discard((pod["metadata"].get("namespace", ""), pod["metadata"]["name"]))
        self.store.modify(PODS, pod, place)
