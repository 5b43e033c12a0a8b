"""The member pods the agents made for fleet pods: adopted after a restart, deleted with their pod.

A scheduler killed between an agent's commit and the pod's status write
leaves a member pod whose fleet pod still reads ``Pending``. So every pod a
scheduler finds already there when it starts is looked up at every agent (by
uid, one request per agent for a whole batch) before it is sampled: a pod
some cluster has is pinned to its node, and the commit there answers "already
there" (it is idempotent by uid). While an agent cannot answer, such a pod
waits rather than risk a second placement.

A deleted fleet pod's member pod is deleted through its cluster's agent (every
agent when the cluster is not known); a sweep at start and every
``sweep_interval`` seconds deletes the member pods of fleet pods deleted while no
scheduler was watching, and the second copy of a pod whose fleet pod is
``Scheduled`` on another cluster (placed again while its first cluster was out of
sight). The same sweep finds the other way round: a fleet pod
``Scheduled`` on a cluster whose agent (watching, so its list is the cluster's)
has no member pod for it lost that pod (the cluster was reset, the pod deleted
there), and is placed again rather than left saying ``Scheduled`` for ever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from shoal.client.rest import NotFound, ShoalClient
from shoal.machinery.backoff import Backoff
from shoal.machinery.types import Obj
from shoal.model.pods import Pod, PodPhase
from shoal.model.scheduler_config import FleetConfig
from shoal.scheduler.pods.agents import AgentError, AgentRef, Agents
from shoal.scheduler.pods.work import Candidate, PodWork

log = logging.getLogger(__name__)
LOOKUP = "/agent/pods/lookup"
DELETE = "/agent/pods/delete"
LIST = "/agent/pods"
DELETE_TRIES = 8


class MemberPods:
    def __init__(self, client: ShoalClient, agents: Agents, config: FleetConfig) -> None:
        self.client = client
        self.agents = agents
        self.config = config

    async def _ask(self, agent: AgentRef, path: str, body: Obj | None) -> Obj | None:
        """The agent's answer, or None when it gave none (or not a 200)."""
        if agent.marked is not None:
            return None
        try:
            status, answer = await self.agents.post(agent, path, body, self.config.commit_timeout,
                                                    "POST" if body is not None else "GET")
        except AgentError:
            return None
        return answer if status == 200 and isinstance(answer, dict) else None

    async def adopt(self, batch: list[PodWork]) -> list[str]:
        """Pin each pod of ``batch`` some agent already has to its node; the clusters that did
        not answer (their pods, unless found elsewhere, still need to be looked up)."""
        uids = [w.pod.metadata.uid or "" for w in batch]
        agents = list(self.agents.by_cluster.values())
        answers = await asyncio.gather(*(self._ask(a, LOOKUP, {"uids": uids}) for a in agents))
        by_uid = {w.pod.metadata.uid: w for w in batch}
        silent: list[str] = []
        for agent, answer in zip(agents, answers, strict=True):
            if answer is None:
                silent.append(agent.cluster)
                continue
            for uid, where in (answer.get("pods") or {}).items():
                work = by_uid.get(uid)
                if work is not None:
                    work.pinned = Candidate(agent.cluster, where["node"], 0.0, {}, {})
                    work.verify = False
        for work in batch:
            if not silent:
                work.verify = False
        return sorted(silent)

    async def _lost(self, pod: Pod, cluster: str, lost: Callable[[Pod], None]) -> None:
        """``pod`` reads Scheduled on ``cluster``, which has no member pod for it: confirmed
        with the API (the informer may lag behind a deletion), it is placed again."""
        try:
            fresh = await self.client.get(Pod, pod.metadata.name, pod.metadata.namespace)
        except NotFound:
            return
        status = fresh.status
        if fresh.metadata.uid != pod.metadata.uid or status.cluster != cluster:
            return
        if status.phase.value != "Scheduled" or fresh.metadata.deleted is not None:
            return
        log.info("fleet pod %s/%s: its member pod is gone from %s; placing it again",
                 fresh.metadata.namespace, fresh.metadata.name, cluster)
        lost(fresh)

    async def delete(self, uid: str, cluster: str | None) -> None:
        """Delete ``uid``'s member pod, retrying with a back-off while its agent cannot answer."""
        backoff = Backoff(0.2, 5.0)
        for _ in range(DELETE_TRIES):
            agents = [a for a in self.agents.by_cluster.values()
                      if cluster is None or a.cluster == cluster]
            answers = await asyncio.gather(*(self._ask(a, DELETE, {"uids": [uid]})
                                             for a in agents))
            if agents and all(a is not None for a in answers):
                return
            await asyncio.sleep(backoff.failed())
        log.warning("member pod of fleet pod uid %s not deleted: its agent does not answer", uid)

    async def sweep(
        self,
        known: Callable[[], dict[str, str]],
        mine: Callable[[str], bool],
        scheduled: Callable[[str], list[Pod]] = lambda cluster: [],
        lost: Callable[[Pod], None] = lambda pod: None,
    ) -> None:
        """At start and every ``sweep_interval`` s: delete member pods whose fleet pod is gone
        or Scheduled on another cluster (``known``: uid → the cluster its fleet pod is
        Scheduled on, "" while not Scheduled), and hand ``lost`` each pod ``scheduled`` on a
        cluster that no longer has it."""
        while True:
            try:
                await self._sweep_once(known, mine, scheduled, lost)
            except Exception:  # a background loop's top level: try again at the next sweep
                log.exception("sweep of member pods failed")
            await asyncio.sleep(self.config.sweep_interval)

    async def _sweep_once(
        self,
        known: Callable[[], dict[str, str]],
        mine: Callable[[str], bool],
        scheduled: Callable[[str], list[Pod]],
        lost: Callable[[Pod], None],
    ) -> None:
        uids = known()  # once per sweep: the API is asked before anything is deleted
        for agent in list(self.agents.by_cluster.values()):
            answer = await self._ask(agent, LIST, None)
            if answer is None:
                continue  # not watching its cluster, or not answering: nothing to conclude
            pods: Obj = answer.get("pods") or {}
            for pod in scheduled(agent.cluster):
                if pod.metadata.uid not in pods:
                    await self._lost(pod, agent.cluster, lost)
            for uid, where in pods.items():
                if not mine(uid) or where.get("inFlight"):
                    continue
                if uids.get(uid, "-") in ("", agent.cluster):
                    continue  # not Scheduled yet, or Scheduled here
                try:  # the informer may lag: the API says whether the pod is really gone
                    pod = await self.client.get(Pod, where["name"], where["namespace"])
                except NotFound:
                    why = "it has no fleet pod"
                else:
                    if pod.metadata.uid != uid:
                        why = "its fleet pod is gone (a new pod has its name)"
                    elif scheduled_on(pod) in ("", agent.cluster):
                        continue
                    else:
                        why = f"its fleet pod is Scheduled on {scheduled_on(pod)}"
                log.info("member pod %s/%s in %s: %s; deleting it",
                         where["namespace"], where["name"], agent.cluster, why)
                await self.delete(uid, agent.cluster)


def scheduled_on(pod: Pod) -> str:
    """The cluster a fleet pod is Scheduled on, "" while it is not: a member pod on any other
    cluster is a second copy (the pod was placed again while its first cluster was out of
    sight) or the remains of a pod that is gone."""
    status = pod.status
    return (status.cluster or "") if status.phase is PodPhase.Scheduled else ""
