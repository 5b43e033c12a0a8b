"""The fleet pipeline as a controller: pods from the API, through the phases, status back.

Informers on pods (every namespace) and clusters (for the agents); samplers
take batches from the queue, sample, decide and commit; the outcome goes to
the pod's status. Nothing is dropped: a pod ends ``Scheduled`` or, after the
configured attempts, ``Failed`` with a reason, and every retry waits a
growing back-off. A round in which too few agents answered in time is not an
attempt (the agents, not the pod, are the trouble): the pod keeps trying, and
its status says why once it has taken as many rounds as attempts are allowed.
With ``shards`` > 1 each scheduler takes only its share of the pods (by uid),
so several schedulers never place the same pod.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections import defaultdict
from collections.abc import Coroutine
from typing import Any

from shoal.client.informer import Informer
from shoal.client.rest import ShoalClient
from shoal.controllers.base import Controller
from shoal.model.kubernetes import Cluster
from shoal.model.pods import Pod, PodPhase
from shoal.model.scheduler_config import FleetConfig
from shoal.scheduler.framework import make_plugin
from shoal.scheduler.pods.agents import Agents
from shoal.scheduler.pods.commit import MultiBind, Outcome, describe
from shoal.scheduler.pods.decision import Decider
from shoal.scheduler.pods.members import MemberPods, scheduled_on
from shoal.scheduler.pods.plugins import SortPlugin
from shoal.scheduler.pods.queue import PodQueue
from shoal.scheduler.pods.sampling import Sampler
from shoal.scheduler.pods.status import StatusWriter
from shoal.scheduler.pods.work import PodWork

log = logging.getLogger(__name__)
NO_AGENT = "waiting: no cluster agent is registered"
NO_LIVE_AGENT = "waiting: no cluster agent answers (every one is marked)"


class FleetPipeline(Controller):
    def __init__(
        self,
        client: ShoalClient,
        config: FleetConfig | None = None,
        clusters: Informer[Cluster] | None = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.config = config or FleetConfig()
        self.agents = Agents(self.config.deadline, client.token)
        sort = make_plugin(self.config.sort, "sort", SortPlugin)
        self.queue = PodQueue(sort.key)
        self.sampler = Sampler(self.agents, self.config)
        self.decider = Decider(self.config)
        self.binder = MultiBind(self.agents, self.config)
        self.members = MemberPods(client, self.agents, self.config)
        self.status = StatusWriter(client, self.config.status_writers)
        self.commits = asyncio.Semaphore(self.config.commits)
        self._pending: set[asyncio.Task[None]] = set()
        self.placed: dict[str, str] = {}  # uid → cluster, bound; Scheduled status not seen yet
        self.counts: dict[str, int] = defaultdict(int)
        self.pods: Informer[Pod] = Informer(client, Pod, on_add=self._pod_seen,
                                            on_update=lambda old, new: self._pod_seen(new),
                                            on_delete=self._pod_deleted)
        # the scheduler's cache of clusters when it runs this pipeline: one per process
        self.clusters = clusters or Informer(client, Cluster)
        self._own_clusters = clusters is None
        self.clusters.also(on_add=self.agents.cluster_changed,
                           on_update=lambda old, new: self.agents.cluster_changed(new),
                           on_delete=self.agents.cluster_deleted)

    def mine(self, pod: Pod) -> bool:
        return self.mine_uid(pod.metadata.uid or pod.metadata.name)

    def mine_uid(self, uid: str) -> bool:
        return self.config.shards == 1 or (
            zlib.crc32(uid.encode()) % self.config.shards == self.config.shard)

    async def start(self) -> None:
        if self._own_clusters:
            await self.start_informers(self.clusters)
        await self.clusters.wait_synced()
        await self.start_informers(self.pods)
        self.spawn(self.agents.probe())
        self.spawn(self.status.run())
        self.spawn(self.members.sweep(self._placements, self.mine_uid, self._scheduled_on,
                                      self._lost))
        for _ in range(self.config.samplers):
            self.spawn(self._sampler())

    async def stop(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)
        await super().stop()
        await self.agents.close()

    # pods from the API -----------------------------------------------------------

    def _pod_seen(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if uid in self.placed:  # bound here: never again, whatever a stale copy says
            if pod.status.phase is not PodPhase.Pending:
                self.placed.pop(uid, None)
            return
        if pod.status.phase is not PodPhase.Pending or pod.metadata.deleted is not None:
            return
        if self.queue.refresh((pod.metadata.namespace or "default", pod.metadata.name), pod):
            return  # a status of ours, or a change, of a pod already queued: no new work
        if self.mine(pod):
            work = PodWork.of(pod)
            # there before this scheduler listed: an earlier one may have committed it
            work.verify = not self.pods.synced.is_set()
            self.queue.add(work)

    def _scheduled_on(self, cluster: str) -> list[Pod]:
        return [
            p for p in self.pods.items()
            if scheduled_on(p) == cluster and self.mine(p)
            and (p.metadata.uid or "") not in self.placed
        ]  # fmt: skip

    def _placements(self) -> dict[str, str]:
        """Each fleet pod's uid → the cluster it is Scheduled on ("" while it is not)."""
        return {p.metadata.uid or "": scheduled_on(p) for p in self.pods.items()}

    def _lost(self, pod: Pod) -> None:
        """A Scheduled pod whose member pod is gone: Pending again, and placed anew."""
        meta = pod.metadata
        status = {"phase": PodPhase.Pending.value, "cluster": "", "node": "",
                  "reason": f"its member pod is gone from {pod.status.cluster}; placing it again"}
        self.status.put(meta.namespace or "default", meta.name, meta.uid or "", status)
        self.counts["lost"] += 1

    def _pod_deleted(self, pod: Pod) -> None:
        """Its member pod goes too: through its cluster's agent, or every agent's when the
        cluster is not known (a commit may have been made before a restart)."""
        uid = pod.metadata.uid or ""
        cluster = self.placed.pop(uid, None) or pod.status.cluster
        self.queue.remove((pod.metadata.namespace or "default", pod.metadata.name))
        if uid and self.mine(pod) and self.agents.by_cluster:
            self._background(self.members.delete(uid, cluster))

    # the pipeline ----------------------------------------------------------------

    async def _sampler(self) -> None:
        """Sample and decide a batch, then hand its commits over and take the next batch."""
        while True:
            batch = await self.queue.take(self.config.batch, self.config.linger)
            try:
                await self._run(batch)
            except asyncio.CancelledError:
                raise
            except Exception:  # a pipeline's top level: the pods go back with a back-off
                log.exception("fleet pipeline failed on %d pods; re-queued", len(batch))
                for work in batch:
                    self._retry(work, "internal error in the scheduler; see its log")
                    self.queue.done(work.key)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        """A task of one pod (commit, status write), kept until it ends, cancelled at stop."""
        task = asyncio.create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _run(self, batch: list[PodWork]) -> None:
        now = time.monotonic()
        for work in batch:
            work.timings["queue"] = now - work.enqueued
        waiting = NO_AGENT if not self.agents.by_cluster else (
            "" if self.agents.live() else NO_LIVE_AGENT)
        if waiting:  # not the pods' fault: no attempt is counted
            for work in batch:
                self._wait_for_agents(work, waiting)
                self.queue.done(work.key)
            return
        unknown = [w for w in batch if w.verify]
        if unknown:
            silent = await self.members.adopt(unknown)
            batch = [w for w in batch if not self._unconfirmed(w, silent)]
        groups: dict[tuple[str, ...], list[PodWork]] = defaultdict(list)
        for work in batch:
            if work.pinned is None:
                groups[tuple(work.pod.spec.placement.cluster_labels)].append(work)
        await self.sampler.sample(groups)
        fresh = [w for g in groups.values() for w in g]
        self.decider.decide([w for w in fresh if self.sampler.enough(w)])
        for _ in batch:
            await self.commits.acquire()
        self._background(self._attempt(batch))

    def _unconfirmed(self, work: PodWork, silent: list[str]) -> bool:
        """Still not known whether a cluster has it: not sampled now (not an attempt)."""
        if not work.verify:
            return False
        work.rounds += 1
        self._retry(work, f"waiting: the agents of {', '.join(silent)} did not say whether "
                          "they already have the pod")
        self.queue.done(work.key)
        return True

    async def _attempt(self, batch: list[PodWork]) -> None:
        """Commit a decided batch (one request per agent and step); each pod's outcome as soon
        as its agent answered (a slow agent holds back only its own pods)."""
        finished: set[int] = set()
        released: set[int] = set()

        def release(work: PodWork) -> None:
            if id(work) not in released:
                released.add(id(work))
                self.commits.release()
                self.queue.done(work.key)

        def decided(work: PodWork, outcome: Outcome) -> None:
            self._finish(work, outcome)
            finished.add(id(work))
            release(work)

        try:
            committing: list[PodWork] = []
            for work in batch:
                work.rounds += 1
                if work.pinned is None and not self.sampler.enough(work):
                    work.candidates = []  # not an attempt: too few agents answered in time
                    decided(work, Outcome(None, 0, False))
                else:
                    work.attempts += 1
                    committing.append(work)
            await self.binder.commit_many(committing, decided)
        except Exception:  # this batch's top level: its pods go back with a back-off
            log.exception("commit of %d pods failed; re-queued", len(batch))
            for work in batch:
                if id(work) not in finished:
                    self._retry(work, "internal error in the scheduler; see its log")
        finally:
            for work in batch:
                release(work)

    def _finish(self, work: PodWork, outcome: Outcome) -> None:
        if outcome.bound is not None:
            uid = work.pod.metadata.uid or ""
            now = self.pods.get(work.pod.metadata.name, work.pod.metadata.namespace)
            if now is None or now.metadata.uid != uid:  # deleted while it was being committed
                self._background(self.members.delete(uid, outcome.bound.cluster))
                return
            self.placed[uid] = outcome.bound.cluster
            self.counts["scheduled"] += 1
            self.spawn_write(work, PodPhase.Scheduled, f"bound to {outcome.bound.cluster}/"
                             f"{outcome.bound.node} at attempt {work.attempts}")
            return
        reason = describe(work, outcome)
        if work.pinned is None and not self.sampler.enough(work):
            reason = "too few agents answered: " + work.explanation["sampling"]["summary"]
        self._retry(work, reason)

    def _retry(self, work: PodWork, reason: str) -> None:
        if work.attempts >= self.config.attempts and work.pinned is None:
            self.counts["failed"] += 1
            self.spawn_write(work, PodPhase.Failed,
                             f"not placed after {work.attempts} attempts: {reason}")
            return
        if work.rounds == self.config.attempts:  # a commit in doubt, or agents too slow: say so
            self.spawn_write(work, PodPhase.Pending, f"still trying after {work.rounds} rounds: "
                             f"{reason}")
        self.counts["retried"] += 1
        work.explanation["retry"] = reason
        work.enqueued = time.monotonic()
        self.queue.add_after(work, self.config.backoff.delay(work.rounds))

    def _wait_for_agents(self, work: PodWork, reason: str) -> None:
        """Not an attempt: the pod waits (with its status saying so) for an agent to answer."""
        if work.pod.status.reason != reason:
            self.spawn_write(work, PodPhase.Pending, reason)
        self.queue.add_after(work, 0.5)

    # status ----------------------------------------------------------------------

    def spawn_write(self, work: PodWork, phase: PodPhase, reason: str) -> None:
        """Hand the outcome to the status writer (batched; the status is the scheduler's alone)."""
        status: dict[str, Any] = {
            "phase": phase.value, "attempts": work.attempts, "reason": reason,
            "explanation": {k: v for k, v in work.explanation.items() if k != "retry"},
            "timings": work.timings}
        if phase is PodPhase.Scheduled and work.bound is not None:
            status["cluster"], status["node"] = work.bound.cluster, work.bound.node
        meta = work.pod.metadata
        self.status.put(meta.namespace or "default", meta.name, meta.uid or "", status)

    def stats(self) -> dict[str, Any]:
        return {**self.counts, "queued": len(self.queue), "commits": self.binder.commits,
                "conflicts": self.binder.conflicts, "agents": len(self.agents.by_cluster)}
