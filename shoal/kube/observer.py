"""The cluster observer: health, nodes and CRDs of every cluster that has a kubeconfig.

One pass per ``interval`` and cluster: list nodes and CRDs, derive the state
(OFFLINE when unreachable, CONNECTING for one pass when it comes back,
NOTREADY without a Ready node, UNHEALTHY under node pressure, else ONLINE),
and write the status only when something changed. FAILING_METRICS belongs to
the scheduler: a reachable cluster in that state keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from shoal.client.informer import Informer, cache_key
from shoal.client.rest import ApiError, ShoalClient, Unreachable
from shoal.controllers.base import Controller
from shoal.kube.client import ClusterKey, KubeApiError, KubeClients, KubeUnreachable
from shoal.model.base import Reason, ReasonCode
from shoal.model.kubernetes import Cluster, ClusterNode, ClusterState

log = logging.getLogger(__name__)

Obj = dict[str, Any]

MAX_NODE_ENTRIES = 50
PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
CONDITION_KEYS = ("message", "reason", "status", "type")


_SUFFIX = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "m": 1e-3, "u": 1e-6, "n": 1e-9,
}  # fmt: skip


def quantity(text: object) -> float:
    """A Kubernetes quantity ("250m", "32Gi", "110") as a number; 0 when unreadable."""
    value = str(text).strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if value.endswith(suffix) and value[: -len(suffix)]:
            try:
                return float(value[: -len(suffix)]) * _SUFFIX[suffix]
            except ValueError:
                return 0.0
    try:
        return float(value)
    except ValueError:
        return 0.0


def add_quantities(total: dict[str, float], more: dict[str, Any]) -> dict[str, float]:
    for name, value in more.items():
        total[name] = total.get(name, 0.0) + quantity(value)
    return total


def _condition(node: Obj, kind: str) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return bool(cond.get("status") == "True")
    return False


def summarize_nodes(nodes: list[Obj]) -> tuple[list[Obj], int, bool]:
    """``status.node_summary`` (totals, then at most 50 nodes), Ready count, any pressure."""
    entries: list[Obj] = []
    capacity: dict[str, float] = {}
    allocatable: dict[str, float] = {}
    ready_count = 0
    pressure = False
    for node in nodes:
        status = node.get("status") or {}
        ready = _condition(node, "Ready")
        pressures = [p for p in PRESSURE if _condition(node, p)]
        ready_count += ready
        pressure = pressure or (ready and bool(pressures))
        capacity = add_quantities(capacity, status.get("capacity") or {})
        allocatable = add_quantities(allocatable, status.get("allocatable") or {})
        if len(entries) < MAX_NODE_ENTRIES:
            entry: Obj = {
                "name": node["metadata"]["name"],
                "ready": ready,
                "capacity": dict(status.get("capacity") or {}),
                "allocatable": dict(status.get("allocatable") or {}),
            }
            if pressures:
                entry["pressure"] = pressures
            entries.append(entry)
    summary: Obj = {
        "summary": True,
        "count": len(nodes),
        "ready": ready_count,
        "capacity": {k: round(v, 3) for k, v in sorted(capacity.items())},
        "allocatable": {k: round(v, 3) for k, v in sorted(allocatable.items())},
    }
    return [summary, *entries], ready_count, pressure


def krake_nodes(nodes: list[Obj]) -> list[ClusterNode]:
    """``status.nodes`` as Krake shows it: name and conditions of at most 50 nodes."""
    return [
        ClusterNode.model_validate(
            {
                "metadata": {"name": node["metadata"]["name"]},
                "status": {
                    "conditions": [
                        {key: str(cond.get(key) or "") for key in CONDITION_KEYS}
                        for cond in (node.get("status") or {}).get("conditions") or []
                    ]
                },
            }
        )
        for node in nodes[:MAX_NODE_ENTRIES]
    ]


class ClusterObserver(Controller):
    def __init__(self, client: ShoalClient, interval: float = 10.0, timeout: float = 5.0) -> None:
        self.client = client
        self.interval = interval
        self.kube = KubeClients(timeout=timeout)
        self.informer: Informer[Cluster] = Informer(
            client, Cluster, on_change=self._changed, on_delete=self._removed
        )
        self._loops: dict[ClusterKey, asyncio.Task[None]] = {}
        self._wake: dict[ClusterKey, asyncio.Event] = {}
        super().__init__()
        self._written: dict[ClusterKey, Cluster] = {}
        self.passes = 0

    async def start(self) -> None:
        await self.start_informers(self.informer)

    async def stop(self) -> None:
        loops = list(self._loops.values())
        for task in loops:
            task.cancel()
        for task in loops:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._loops.clear()
        await super().stop()
        await self.kube.close()

    # cluster events ------------------------------------------------------------------

    def _changed(self, cluster: Cluster, old: Cluster | None = None) -> None:
        key = cache_key(cluster)
        observable = cluster.spec.kubeconfig is not None and cluster.metadata.deleted is None
        if not observable:
            self._stop_loop(key)
            return
        if key not in self._loops:
            self._wake[key] = asyncio.Event()
            self._loops[key] = asyncio.create_task(self._loop(key))
        elif old is not None and old.spec.kubeconfig != cluster.spec.kubeconfig:
            self._wake[key].set()  # new credentials: look now

    async def _removed(self, cluster: Cluster) -> None:
        key = cache_key(cluster)
        self._stop_loop(key)
        await self.kube.forget(*key)

    def _stop_loop(self, key: ClusterKey) -> None:
        task = self._loops.pop(key, None)
        self._wake.pop(key, None)
        self._written.pop(key, None)
        if task is not None:
            task.cancel()

    async def _loop(self, key: ClusterKey) -> None:
        while True:
            try:
                await self.observe(key)
            except asyncio.CancelledError:
                raise
            except (ApiError, Unreachable) as error:
                log.info("cluster %s/%s: status not written: %s", *key, error)
            except Exception:
                log.exception("cluster %s/%s: observation failed", *key)
            wake = self._wake.get(key)
            if wake is None:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), self.interval)
            wake.clear()

    # one pass -----------------------------------------------------------------------

    async def observe(self, key: ClusterKey) -> None:
        cluster = self.informer.get(key[1], key[0])
        if cluster is None or cluster.spec.kubeconfig is None:
            return
        written = self._written.get(key)
        if written is not None and (written.metadata.resource_version or 0) > (
            cluster.metadata.resource_version or 0
        ):
            cluster = written  # our last write, not yet seen by the informer
        self.passes += 1
        status = cluster.status.model_copy(deep=True)
        try:
            kube = await self.kube.get(cluster)
            nodes: list[Obj] = (await kube.request("GET", "/api/v1/nodes")).get("items") or []
            crds = await self._crds(kube)
        except KubeUnreachable as error:
            status.state = ClusterState.OFFLINE
            status.reason = Reason(code=ReasonCode.CLUSTER_NOT_REACHABLE, message=str(error)[:500])
        except KubeApiError as error:
            status.state = ClusterState.OFFLINE
            status.reason = Reason(code=ReasonCode.KUBERNETES_ERROR, message=str(error)[:500])
        else:
            summary, ready, pressure = summarize_nodes(nodes)
            status.node_summary = summary
            status.nodes = krake_nodes(nodes)
            status.custom_resources = crds
            if cluster.status.state is ClusterState.FAILING_METRICS:
                pass  # the scheduler's state while the cluster answers
            elif cluster.status.state is ClusterState.OFFLINE:
                status.state = ClusterState.CONNECTING
                self._wake[key].set()  # one pass in CONNECTING, then the real state
            elif ready == 0:
                status.state = ClusterState.NOTREADY
            elif pressure:
                status.state = ClusterState.UNHEALTHY
            else:
                status.state = ClusterState.ONLINE
            if status.reason is not None and status.reason.code in (
                ReasonCode.CLUSTER_NOT_REACHABLE,
                ReasonCode.KUBERNETES_ERROR,
            ):
                status.reason = None
        if status == cluster.status:
            return
        cluster.status = status
        self._written[key] = await self.client.update_status(cluster)

    @staticmethod
    async def _crds(kube: Any) -> list[str]:
        try:
            data = await kube.request(
                "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            )
        except KubeApiError as error:
            if error.status in (403, 404):
                return []
            raise
        names = sorted(
            str(item["metadata"]["name"])
            for item in data.get("items") or []
            if item.get("metadata", {}).get("name")
        )
        return names
