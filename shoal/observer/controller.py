"""The cluster observer: health, nodes and CRDs of every cluster that has a kubeconfig,
and the lease of every pull cluster.

Each cluster's nodes and CRDs are watched (``shoal.observer.reflector``: resumed
from their resourceVersion, re-listed on 410, after a failure and every
``interval`` seconds as a safety net). Any change derives the state (OFFLINE
when unreachable, CONNECTING for one write when it comes back, NOTREADY
without a Ready node, UNHEALTHY under node pressure, else ONLINE) and writes
the status at once when something changed, so the scheduler re-evaluates
the cluster's applications within a second of a node or CRD event.
FAILING_METRICS belongs to the scheduler: a reachable cluster in that state
keeps it.

A pull cluster is never dialled: its agent writes the same fields and renews
its lease (``status.heartbeat``). The observer marks it OFFLINE when no new
heartbeat has come for ``lease`` seconds, timed on its own clock from when it
saw the last one (the member's clock may be wrong); the agent's next write
brings it back through CONNECTING.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any

from shoal.client.informer import Informer, cache_key
from shoal.client.kube import ClusterKey, KubeApiError, KubeClients, KubeCluster, KubeUnreachable
from shoal.client.rest import ApiError, Conflict, ShoalClient, Unreachable
from shoal.controllers.base import Controller
from shoal.events import Recorder, reasons
from shoal.machinery.backoff import Backoff
from shoal.machinery.resources import Amounts
from shoal.machinery.tasks import cancel_and_wait
from shoal.machinery.types import Obj
from shoal.model.kubernetes import (
    BUILDING_STATES,
    Cluster,
    ClusterNode,
    ClusterState,
    ClusterStatus,
)
from shoal.model.observed import (
    OWN_REASONS,
    krake_nodes,
    next_state,
    node_room,
    pod_key,
    pod_usage,
    requested,
    requested_per_node,
    summarize_nodes,
    unreachable,
)
from shoal.observer.reflector import Reflector

__all__ = ["ClusterObserver", "node_room", "requested_per_node", "summarize_nodes"]

log = logging.getLogger(__name__)


NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# The fields the observer writes (a field-level patch: docs/status-ownership.md).
OWN_FIELDS = ("state", "reason", "nodes", "node_summary", "custom_resources")
REQUESTED_EVERY = 5.0
"""Seconds between two sums of what the pods request: every pod started or stopped is not
worth a status write (and a watch event to every component)."""


@dataclass(eq=False)
class Watched:
    """One observed cluster: its two watched lists and the task that writes its status."""

    nodes: Reflector
    crds: Reflector
    pods: Reflector
    wake: asyncio.Event
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    # the nodes' summary, made again only when the nodes changed: (nodes.changes, summary)
    summary: tuple[int, tuple[list[Obj], int, bool], list[ClusterNode]] | None = None
    pods_timer: asyncio.TimerHandle | None = None  # the next sum of the pods' requests
    requested: dict[str, float] | None = None  # their last sum (None: not listed yet)
    per_node: dict[str, Amounts] | None = None  # the same per node
    sums: int = 0  # sums made so far (the room is made again after each)
    room: tuple[int, int, Obj] | None = None  # (nodes.changes, sums, room) last made

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.pods_timer is not None:
            self.pods_timer.cancel()

    def pods_changed(self) -> None:
        """A pod started or stopped: what the pods request is summed at once the first time,
        then at most every ``REQUESTED_EVERY`` seconds; each sum wakes the status writer."""
        if not self.pods.synced:
            return  # nothing to sum yet
        if self.requested is None:
            self._sum()
        elif self.pods_timer is None:
            self.pods_timer = asyncio.get_running_loop().call_later(REQUESTED_EVERY, self._sum)

    def _sum(self) -> None:
        self.pods_timer = None
        self.requested = requested(self.pods.items.values())
        self.per_node = requested_per_node(self.pods.items.values())
        self.sums += 1
        self.wake.set()


@dataclass(eq=False)
class ClusterObserver(Controller):
    """Watches every observable cluster; ``interval`` is the safety-net re-list period.

    ``delay`` gathers a burst of events (a node's several conditions, a
    cluster coming back) into one status write.
    """

    client: ShoalClient
    interval: float = 30.0
    timeout: InitVar[float] = 5.0
    _: KW_ONLY
    delay: float = 0.02
    retry: float = 0.25
    lease: float = 40.0
    """Seconds a pull cluster stays ONLINE without a new heartbeat (its agent renews at a
    quarter of it)."""

    def __post_init__(self, timeout: float) -> None:
        self.kube = KubeClients(timeout=timeout)
        self.informer: Informer[Cluster] = Informer(
            self.client, Cluster, on_change=self._changed, on_delete=self._removed
        )
        self._watched: dict[ClusterKey, Watched] = {}
        self.events = Recorder(self.client, "cluster-observer")
        super().__init__()
        self._written: dict[ClusterKey, Cluster] = {}
        self.passes = 0  # status derivations (tests, metrics)
        self.writes = 0
        # pull clusters: (last heartbeat seen, loop time it was seen), and the lapse timers
        self._beats: dict[ClusterKey, tuple[object, float]] = {}
        self._lapses: dict[ClusterKey, asyncio.TimerHandle] = {}
        self._lapsing: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self.start_informers(self.informer)

    async def stop(self) -> None:
        for timer in self._lapses.values():
            timer.cancel()
        self._lapses.clear()
        for lapsing in list(self._lapsing):
            lapsing.cancel()
        watched = list(self._watched.values())
        self._watched.clear()
        tasks = [task for w in watched for task in w.tasks]
        await cancel_and_wait(tasks)
        await super().stop()
        await self.kube.close()
        await self.events.close()

    def watched(self, namespace: str | None, name: str) -> Watched | None:
        return self._watched.get((namespace, name))

    # cluster events ------------------------------------------------------------------

    def _changed(self, cluster: Cluster, old: Cluster | None = None) -> None:
        reasons.cluster_state(self.events, cluster, old)  # whoever changed it
        key = cache_key(cluster)
        if cluster.spec.mode == "pull":
            self._stop(key)  # never dialled: its agent reports, its lease says it is there
            if cluster.metadata.deleted is None:
                self._follow_lease(key, cluster, old)
            return
        self._forget_lease(key)
        observable = cluster.spec.kubeconfig is not None and cluster.metadata.deleted is None
        if not observable:
            self._stop(key)
            return
        if (
            key in self._watched
            and old is not None
            and (old.spec.kubeconfig != cluster.spec.kubeconfig)
        ):
            self._stop(key)  # new credentials: watch again with them
        watched = self._watched.get(key)
        if watched is None:
            self._watch(key)
        elif cluster.metadata.resource_version != self._version(key):
            watched.wake.set()  # someone else's write: check that our fields still hold

    async def _removed(self, cluster: Cluster) -> None:
        key = cache_key(cluster)
        self._stop(key)
        self._forget_lease(key)
        await self.kube.forget(*key)

    def _version(self, key: ClusterKey) -> int | None:
        written = self._written.get(key)
        return written.metadata.resource_version if written is not None else None

    def _watch(self, key: ClusterKey) -> None:
        wake = asyncio.Event()

        async def kube() -> KubeCluster:
            cluster = self.informer.get(key[1], key[0])
            if cluster is None:
                raise KubeUnreachable(f"cluster {key[1]} is gone")
            return await self.kube.get(cluster)

        def reflector(path: str, absent_ok: bool, **options: Any) -> Reflector:
            return Reflector(path, kube, wake.set, resync=self.interval, retry=self.retry,
                             absent_ok=absent_ok, **options)  # fmt: skip

        pods = reflector(PODS, True, key=pod_key, keep=pod_usage)
        watched = Watched(reflector(NODES, False), reflector(CRDS, True), pods, wake)
        pods.on_change = watched.pods_changed
        watched.tasks = [
            asyncio.create_task(watched.nodes.run()),
            asyncio.create_task(watched.crds.run()),
            asyncio.create_task(watched.pods.run()),
            asyncio.create_task(self._writer(key, watched)),
        ]
        self._watched[key] = watched

    def _stop(self, key: ClusterKey) -> None:
        watched = self._watched.pop(key, None)
        self._written.pop(key, None)
        if watched is not None:
            watched.cancel()

    # pull clusters' leases ------------------------------------------------------------

    def _follow_lease(self, key: ClusterKey, cluster: Cluster, old: Cluster | None) -> None:
        """Note a new heartbeat (on this process' clock) and time the lease from it."""
        loop = asyncio.get_running_loop()
        beat = cluster.status.heartbeat
        seen = self._beats.get(key)
        if seen is None or seen[0] != beat:
            if old is None and beat is None:
                reasons.cluster_joined(self.events, cluster)
            seen = self._beats[key] = (beat, loop.time())
        timer = self._lapses.pop(key, None)
        if timer is not None:
            timer.cancel()
        if cluster.status.state is ClusterState.OFFLINE:
            return  # lapsed already: the next heartbeat times it again
        left = max(0.0, seen[1] + self.lease - loop.time())
        self._lapses[key] = loop.call_later(left, self._start_lapse, key)

    def _forget_lease(self, key: ClusterKey) -> None:
        self._beats.pop(key, None)
        timer = self._lapses.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _start_lapse(self, key: ClusterKey) -> None:
        self._lapses.pop(key, None)
        task = asyncio.create_task(self._lapse(key))
        self._lapsing.add(task)
        task.add_done_callback(self._lapsing.discard)

    async def _lapse(self, key: ClusterKey) -> None:
        """OFFLINE, unless a heartbeat came meanwhile (a compare-and-swap write: an agent's
        write in between wins, and is timed again)."""
        for _ in range(5):
            cluster = self.informer.get(key[1], key[0])
            seen = self._beats.get(key)
            if cluster is None or cluster.spec.mode != "pull" or seen is None:
                return
            if cluster.status.state is ClusterState.OFFLINE:
                return
            loop = asyncio.get_running_loop()
            if seen[0] != cluster.status.heartbeat or loop.time() - seen[1] < self.lease:
                self._follow_lease(key, cluster, cluster)
                return
            status = unreachable(
                cluster.status, f"lease lapsed: no heartbeat from its agent for "
                f"{self.lease:g} s", api_error=False)  # fmt: skip
            fields = {"state": status.state, "reason": status.reason}
            try:
                await self.client.patch_status(
                    Cluster, key[1], key[0], fields, cluster.metadata.resource_version
                )
                self.writes += 1
                return
            except Conflict:
                await self.client.get(Cluster, key[1], key[0])
                await asyncio.sleep(self.delay)  # the informer catches up with that write
            except (ApiError, Unreachable) as error:
                log.info("cluster %s/%s: lease lapse not written: %s", *key, error)
                await asyncio.sleep(self.retry)
        timer = self._lapses.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._lapses[key] = asyncio.get_running_loop().call_later(self.retry, self._start_lapse,
                                                                  key)  # fmt: skip

    # status writes ------------------------------------------------------------------

    async def _writer(self, key: ClusterKey, watched: Watched) -> None:
        """Write the status whenever a watch or a foreign write woke it; retry on failure."""
        backoff = Backoff(self.retry, 10.0)
        while True:
            await watched.wake.wait()
            await asyncio.sleep(self.delay)
            watched.wake.clear()
            try:
                await self.observe(key, watched)
                backoff.succeeded()
            except asyncio.CancelledError:
                raise
            except (ApiError, Unreachable) as error:
                log.info("cluster %s/%s: status not written: %s", *key, error)
                await asyncio.sleep(backoff.failed())
                watched.wake.set()
            except Exception:
                log.exception("cluster %s/%s: observation failed", *key)
                await asyncio.sleep(backoff.failed())
                watched.wake.set()

    async def observe(self, key: ClusterKey, watched: Watched) -> None:
        """Derive the status from the watched lists; write it when it changed."""
        cluster = self.informer.get(key[1], key[0])
        if cluster is None or cluster.spec.kubeconfig is None:
            return
        written = self._written.get(key)
        if written is not None and (written.metadata.resource_version or 0) > (
            cluster.metadata.resource_version or 0
        ):
            cluster = written  # our last write, not yet seen by the informer
        for _ in range(5):
            status = self.derive(cluster, watched)
            if status is None or status == cluster.status:
                return
            if status.state is ClusterState.CONNECTING:
                watched.wake.set()  # one write in CONNECTING, then the real state
            fields = {name: getattr(status, name) for name in OWN_FIELDS}
            try:
                self._written[key] = await self.client.patch_status(
                    Cluster, key[1], key[0], fields, cluster.metadata.resource_version
                )
                self.writes += 1
                return
            except Conflict:  # the state may have changed (FAILING_METRICS): derive again
                cluster = await self.client.get(Cluster, key[1], key[0])

    def derive(self, cluster: Cluster, watched: Watched) -> ClusterStatus | None:
        """The cluster's status with the observer's fields as the watches show them now.

        None while a list is still missing (the first write waits for both).
        """
        self.passes += 1
        status = self._derive(cluster, watched)
        if status is not None and cluster.status.state in BUILDING_STATES:
            status.state, status.reason = cluster.status.state, cluster.status.reason
        return status

    def _derive(self, cluster: Cluster, watched: Watched) -> ClusterStatus | None:
        error = watched.nodes.error or watched.crds.error
        if error is not None:
            return unreachable(cluster.status, str(error), isinstance(error, KubeApiError))
        status = cluster.status.model_copy(deep=True)
        if not (watched.nodes.synced and watched.crds.synced):
            return None
        if watched.summary is None or watched.summary[0] != watched.nodes.changes:
            nodes = [watched.nodes.items[name] for name in sorted(watched.nodes.items)]
            watched.summary = (watched.nodes.changes, summarize_nodes(nodes), krake_nodes(nodes))
        status.nodes = list(watched.summary[2])
        summary, ready, pressure = watched.summary[1]
        summary = [dict(summary[0]), *summary[1:]]
        if watched.requested is not None:  # room for more pods: allocatable minus requested
            summary[0]["requested"] = watched.requested
        if watched.room is None or watched.room[:2] != (watched.nodes.changes, watched.sums):
            room = node_room(watched.nodes.items.values(), watched.per_node or {})
            watched.room = (watched.nodes.changes, watched.sums, room)
        summary[0]["room"] = watched.room[2]
        status.node_summary = summary
        status.custom_resources = sorted(watched.crds.items)
        status.state = next_state(cluster.status.state, ready, pressure)
        if status.reason is not None and status.reason.code in OWN_REASONS:
            status.reason = None
        return status
