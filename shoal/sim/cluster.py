"""One simulated cluster: the parts of a Kubernetes control plane wired around one store.

``SimCluster`` is the facade the HTTP layer, the fleet and tests use. The parts:
``Verbs`` (verbs, admission, server-side apply), ``NodeSet`` (nodes and their
allocated capacity), ``Scheduler``, ``Kubelet``, the workload controllers, and
``Faults``. Everything is event-driven: every store change goes through
``_on_event``, which updates the node set and enqueues the affected keys (the
owner of a pod, a pod to schedule…) for the cluster's one worker task.
Nothing ever loops over all objects of a kind on a timer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import TypedDict, Unpack

from shoal.machinery.types import Obj
from shoal.machinery.workqueue import WorkQueue
from shoal.sim import system_pods
from shoal.sim.admission import Defaults
from shoal.sim.controllers import RECONCILERS, Controllers
from shoal.sim.controllers.crd import crd_changed
from shoal.sim.faults import Faults
from shoal.sim.kubelet import Kubelet
from shoal.sim.nodes import NodeSet, NodeTemplate
from shoal.sim.objects import (
    CRDS,
    DAEMONSETS,
    DEPLOYMENTS,
    NAMESPACES,
    NODES,
    PODS,
    SERVICES,
    WORKLOADS,
    controller_of,
    pod_finished,
    pod_key,
    pod_requests,
)
from shoal.sim.scheduler import RETRY_PARKED, Scheduler
from shoal.sim.store import ApiError, Store
from shoal.sim.verbs import Verbs

log = logging.getLogger(__name__)

#: A work item: the handler's name, then its arguments; a repeated item is queued once.
Item = tuple[str, ...]
#: Items handled between two yields to the loop (the HTTP server shares it).
YIELD_EVERY = 200

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

REQUEST_LOG = 10_000  # requests each cluster remembers for GET /admin/clusters/{name}/requests


class ClusterOptions(TypedDict, total=False):
    """How a simulated cluster is made (all optional; None means the default)."""

    node_labels: dict[str, str] | None
    cpu: str
    memory: str
    max_pods: int
    region: str | None
    zones: int
    mixed: bool
    site: tuple[float, float] | None
    pod_start_delay: float | None
    job_duration: float | None
    token: str | None
    system_pods: bool


class SimCluster:
    """A simulated Kubernetes cluster held in memory."""

    def __init__(self, name: str, nodes: int = 3, **options: Unpack[ClusterOptions]) -> None:
        self.name = name
        self.token = options.get("token") or secrets.token_hex(16)
        # who called its Kubernetes API, newest last: an audit of who reached the cluster
        self.requests: deque[Obj] = deque(maxlen=REQUEST_LOG)
        self.template = NodeTemplate(
            name, cpu=options.get("cpu", "8"), memory=options.get("memory", "32Gi"),
            max_pods=options.get("max_pods", 110), labels=dict(options.get("node_labels") or {}),
            region=options.get("region") or "", zones=options.get("zones", 3),
            mixed=options.get("mixed", False), site=options.get("site"),
        )
        self.store = Store()
        self.registry = self.store.registry
        self.rt = self.store.rt
        self.nodes = NodeSet()
        self.queue: WorkQueue[Item] = WorkQueue()
        self._worker: asyncio.Task[None] | None = None
        self.api = Verbs(self.store, Defaults(self.node_object))
        self.fault_injector = Faults(self.api, self.nodes, self.node_object)
        self.scheduler = Scheduler(self.store, self.nodes, self.queue)
        self.kubelet = Kubelet(
            self.store, self.nodes, self.queue, self.fault_injector.node_ready,
            _given(options.get("pod_start_delay"), 0.5), _given(options.get("job_duration"), 1.0),
        )
        self.controllers = Controllers(self.api, self.nodes)
        self._handlers: dict[str, Callable[..., object]] = {
            "schedule": self.scheduler.schedule,
            "start": self.kubelet.start,
            "finish": self.kubelet.finish,
            "daemonsets-all": self._all_daemonsets,
            RETRY_PARKED[0]: self.scheduler.retry_parked,
            **{key: functools.partial(self.controllers.reconcile, key, fn)
               for key, fn in RECONCILERS.items()},
        }
        # the API verbs and the binding subresource
        self.create = self.api.create
        self.get = self.api.get
        self.update = self.api.update
        self.patch = self.api.patch
        self.delete = self.api.delete
        self.bind = self.scheduler.bind
        # faults
        self.set_unreachable = self.fault_injector.set_unreachable
        self.set_node_fault = self.fault_injector.set_node_fault
        self.clear_faults = self.fault_injector.clear
        self.faults = self.fault_injector.report
        self._bootstrap(nodes)
        if options.get("system_pods"):
            self._add_system_pods()

    def _bootstrap(self, nodes: int) -> None:
        """Namespaces and nodes exist from the start, without watch history."""
        self.store.log_events = False
        for ns in SYSTEM_NAMESPACES:
            self.create(self.rt(NAMESPACES), {"metadata": {"name": ns}})
        for i in range(nodes):
            self.add_node(f"n-{i}", self.node_object(f"n-{i}", i))
        for node in self.store.list(NODES):
            self.nodes.refresh(node)
        self.store.log_events = True
        self.store.compact()
        self.store.listeners.append(self._on_event)

    def _add_system_pods(self) -> None:
        """DNS, proxy and control-plane pods in kube-system, as a fresh cluster runs them
        (``shoal.sim.system_pods``); the workload controllers make the pods."""
        deployment, service = system_pods.coredns()
        self.create(self.rt(DEPLOYMENTS), deployment)
        self.create(self.rt(SERVICES), service)
        self.create(self.rt(DAEMONSETS), system_pods.kube_proxy())
        if self.nodes.order:
            first = self.store.get(NODES, "", self.nodes.order[0])
            for pod in system_pods.static_pods(first or self.node_object(self.nodes.order[0])):
                self.create(self.rt(PODS), pod)

    # -- settings tests change on a running cluster ------------------------------

    @property
    def pod_start_delay(self) -> float:
        return self.kubelet.pod_start_delay

    @pod_start_delay.setter
    def pod_start_delay(self, seconds: float) -> None:
        self.kubelet.pod_start_delay = seconds

    @property
    def unreachable(self) -> bool:
        return self.fault_injector.unreachable

    @property
    def latency(self) -> float:
        return self.fault_injector.latency

    # -- nodes ---------------------------------------------------------------------

    def node_object(self, name: str, index: int | None = None) -> Obj:
        """A node with the cluster's capacity and labels (zone by ``index``, default next)."""
        return self.template.node(name, len(self.nodes.order) if index is None else index)

    def add_node(self, name: str, obj: Obj | None = None) -> Obj:
        """Add a node (with default capacity and labels unless ``obj`` is given)."""
        return self.create(self.rt(NODES), obj or self.node_object(name))

    def resize(self, nodes: int) -> None:
        """Grow to ``nodes`` nodes (named ``n-<i>``) or shrink by removing the newest ones."""
        if nodes < 0:
            raise ValueError("nodes must be 0 or more")
        names = list(self.nodes.order)
        index = len(names)
        while len(names) < nodes:
            name = f"n-{index}"
            index += 1
            if name in self.nodes:
                continue
            self.add_node(name, self.node_object(name, index - 1))
            names.append(name)
        for name in reversed(names[nodes:]):
            self.delete(self.rt(NODES), "", name)

    # -- the worker ------------------------------------------------------------------

    def start(self) -> None:
        """Start the controller worker on the running loop (idempotent)."""
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work())

    async def stop(self) -> None:
        self.store.close_watches()
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None

    async def _work(self) -> None:
        """The one worker: each item to its handler; a failure is logged, not retried
        (the next event about the object queues it again)."""
        handled = 0
        while True:
            item = await self.queue.get()
            try:
                self._handlers[item[0]](*item[1:])
            except ApiError as exc:
                log.debug("sim %s: %s: %s", self.name, item, exc.message)
            except Exception:  # the worker's top level: one item never stops the cluster
                log.exception("sim %s: controller failed on %s", self.name, item)
            finally:
                self.queue.done(item)
            handled += 1
            if handled % YIELD_EVERY == 0:
                await asyncio.sleep(0)

    def _all_daemonsets(self) -> None:
        for ds in self.store.list(DAEMONSETS):
            self.queue.add((DAEMONSETS, ds["metadata"]["namespace"], ds["metadata"]["name"]))

    # -- store events ------------------------------------------------------------------

    def _on_event(self, key: str, etype: str, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        if key == PODS:
            self._pod_changed(etype, obj)
        elif key == NODES:
            self._node_changed(etype, obj, old)
        elif key == CRDS:
            crd_changed(self.store, etype, obj)
        elif key in RECONCILERS and etype != "DELETED" and not self.controllers.writing_status:
            # A controller's own status write needs no second pass over the same object
            # (a third of the workload reconciles in a Deployment burst); its owner's does.
            self.queue.add((key, meta.get("namespace", ""), meta["name"]))
        if key == PODS or key in RECONCILERS:
            ctl = controller_of(obj)
            if ctl and ctl.get("kind") in WORKLOADS:
                self.queue.add((WORKLOADS[ctl["kind"]], meta.get("namespace", ""),
                                str(ctl.get("name"))))

    def _pod_changed(self, etype: str, pod: Obj) -> None:
        """Keep capacity counts exact, then hand the pod to the scheduler or the kubelet."""
        key = pod_key(pod)
        node = pod.get("spec", {}).get("nodeName")
        if etype == "DELETED" or not node or pod_finished(pod):
            if self.nodes.release(key):
                self.scheduler.room_freed()
            self.scheduler.pod_unbound(key, pod, etype == "DELETED")
            return
        self.nodes.place(key, node, *pod_requests(pod))
        self.kubelet.pod_bound(pod)

    def _node_changed(self, etype: str, node: Obj, old: Obj | None) -> None:
        name = node["metadata"]["name"]
        if etype == "DELETED":
            self._node_gone(name)
            return
        if self.nodes.refresh(node):
            self.scheduler.room_freed()
        if etype == "ADDED" or (old is not None and old["metadata"].get("labels")
                                != node["metadata"].get("labels")):
            self.queue.add(("daemonsets-all",))
        if old is not None and old.get("status", {}).get("conditions") != node.get(
                "status", {}).get("conditions"):
            self.kubelet.sync_readiness(name)
            self.queue.add(("daemonsets-all",))

    def _node_gone(self, name: str) -> None:
        """A deleted node takes its pods with it; their controllers re-create them."""
        pods = self.nodes.remove(name)
        if pods is None:
            return
        self.queue.add(("daemonsets-all",))
        for ns, pod in list(pods):
            if self.store.get(PODS, ns, pod) is not None:
                self.delete(self.rt(PODS), ns, pod)

    # -- reports -----------------------------------------------------------------------

    def summary(self) -> Obj:
        return {
            "name": self.name,
            "nodes": len(self.nodes),
            "ready_nodes": sum(1 for n in self.nodes.nodes if self.fault_injector.node_ready(n)),
            "pods": len(self.store.objects.get(PODS, {})),
            "resource_version": self.store.rv,
            "faults": self.faults(),
        }


def _given(value: float | None, default: float) -> float:
    return default if value is None else value
