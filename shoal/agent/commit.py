"""The commit phase: a pod onto a node, under that node's lock, never over-committing it.

Order, for one node at a time: take the node's lock; check the pod against
the cache's current state (every enabled filter, so resources and taints are
checked on what the watch and earlier commits say now); reserve the pod's
requests in the cache; create the pod in the member cluster already bound to
the node; record it in the cache; only then unlock. A failed or cancelled
create drops the reservation before the lock is released.

Idempotent by the pod's uid: the member pod keeps the pod's name and carries
the uid in an annotation, so a repeated commit finds the pod it already made
(in the cache, or through the cluster's "already exists" answer) instead of
making a second one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shoal.agent.cache import NodeCache
from shoal.agent.framework import Pipeline
from shoal.agent.locks import NodeLocks
from shoal.agent.pod import UID_ANNOTATION, PodRequest
from shoal.client.kube import KubeApiError, KubeCluster
from shoal.machinery.types import Obj


class CommitRefused(Exception):
    """The commit cannot be made; ``status`` says how the API answers it."""

    def __init__(self, status: int, detail: str, reason: str = "") -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.reason = reason


@dataclass
class Committed:
    pod: PodRequest
    node: str
    created: bool  # False: an earlier commit of the same uid made it
    timings: dict[str, float]

    def body(self) -> Obj:
        return {"pod": {"name": self.pod.name, "namespace": self.pod.namespace,
                        "uid": self.pod.uid},
                "nodeName": self.node, "created": self.created, "timings": self.timings}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


class Committer:
    def __init__(self, kube: KubeCluster, cache: NodeCache, pipeline: Pipeline) -> None:
        self.kube = kube
        self.cache = cache
        self.pipeline = pipeline
        self.config = pipeline.config
        self.locks = NodeLocks()
        self.in_flight: set[str] = set()  # pod keys being created: one reservation per key

    async def commit(self, pod: PodRequest, node: str) -> Committed:
        started = time.perf_counter()
        if self._repeat(pod, node):
            return Committed(pod, node, False, {"totalMs": _ms(time.perf_counter() - started)})
        async with self.locks.hold(node, self.config.lock_timeout):
            locked = time.perf_counter()
            created = False
            if not self._repeat(pod, node):  # a commit of the same uid we waited behind
                self._check(pod, node)
                created = await self._create(pod, node)
        done = time.perf_counter()
        timings = {"lockMs": _ms(locked - started), "createMs": _ms(done - locked),
                   "totalMs": _ms(done - started)}
        return Committed(pod, node, created, timings)

    def _repeat(self, pod: PodRequest, node: str) -> bool:
        """Whether this uid's pod is already on ``node``; 409 when it is elsewhere."""
        placed = self.cache.committed(pod.uid)
        if placed is None:
            return False
        if placed.node != node:
            raise CommitRefused(409, f"pod uid {pod.uid} is already committed to node "
                                     f"{placed.node}", "already committed")
        return True

    def _check(self, pod: PodRequest, node: str) -> None:
        info = self.cache.nodes.get(node)
        if info is None:
            raise CommitRefused(404, f"node {node} not found in the cluster", "no such node")
        reason = self.pipeline.reject(pod, info)
        if reason is not None:
            detail = f"node {node}: {reason}"
            if reason.startswith("insufficient "):
                resource = reason.removeprefix("insufficient ")
                detail += (f" (pod requests {pod.requests.get(resource, 0)}, "
                           f"{info.available().get(resource, 0)} available)")
            raise CommitRefused(409, detail, reason)

    async def _create(self, pod: PodRequest, node: str) -> bool:
        """Reserve, create, record; False when the pod turned out to exist already."""
        if pod.key in self.in_flight:
            raise CommitRefused(409, f"pod {pod.key} is being committed to another node",
                                "commit in progress")
        self.in_flight.add(pod.key)
        self.cache.reserve(pod.key, node, pod.requests, pod.uid)
        try:
            obj, created = await self._post(pod, node)
        except BaseException:
            self.cache.release(pod.key)  # failed, timed out or cancelled: nothing stays reserved
            raise
        else:
            self.cache.record(obj)
        finally:
            self.in_flight.discard(pod.key)
        return created

    async def _post(self, pod: PodRequest, node: str) -> tuple[Obj, bool]:
        path = f"/api/v1/namespaces/{pod.namespace}/pods"
        body = pod.manifest(node)
        timeout = self.config.commit_timeout
        try:
            try:
                created: Obj = await self.kube.request("POST", path, body=body, timeout=timeout)
            except KubeApiError as error:
                if error.status != 404:
                    raise
                await self.kube.ensure_namespace(pod.namespace)
                created = await self.kube.request("POST", path, body=body, timeout=timeout)
        except KubeApiError as error:
            if error.status == 409:
                return await self._existing(pod, node), False
            if error.status in (400, 403, 422):
                raise CommitRefused(422, f"the cluster refused the pod: {error.body[:300]}",
                                    "refused") from error
            raise
        return created, True

    async def _existing(self, pod: PodRequest, node: str) -> Obj:
        """The name is taken: ours from an earlier commit (same uid, same node), or a conflict."""
        found: Obj = await self.kube.request(
            "GET", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            timeout=self.config.commit_timeout)
        meta = found.get("metadata") or {}
        uid = (meta.get("annotations") or {}).get(UID_ANNOTATION)
        on = (found.get("spec") or {}).get("nodeName")
        if uid != pod.uid:
            raise CommitRefused(409, f"pod {pod.key} already exists in the cluster with "
                                     f"another uid", "name taken")
        if on != node:
            raise CommitRefused(409, f"pod uid {pod.uid} is already committed to node {on}",
                                "already committed")
        return found
