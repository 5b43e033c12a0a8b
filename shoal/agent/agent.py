"""One cluster agent: the member cluster's client, the node cache and its sync, the plugins.

Everything the HTTP routes need, with no HTTP in it.
"""

from __future__ import annotations

import logging
import time

import shoal.agent.plugins  # noqa: F401  (registers the built-in plugins)
from shoal.agent.cache import NodeCache
from shoal.agent.commit import Committed, Committer
from shoal.agent.config import AgentConfig
from shoal.agent.framework import Pipeline, Sample, nodes_to_sample
from shoal.agent.members import Members
from shoal.agent.pod import Pod, PodRequest
from shoal.agent.stats import Timings
from shoal.agent.sync import ClusterSync
from shoal.agent.vector import VectorSampler
from shoal.client.kube import KubeCluster, api_client
from shoal.machinery.types import Obj

log = logging.getLogger(__name__)

VECTOR_NODES = 256  # clusters this large sample with numpy (smaller ones: the plugin loop)


async def connect(kubeconfig: Obj, timeout: float) -> KubeCluster:
    """A client for the member cluster (the kube controller's, without its per-cluster cache)."""
    return KubeCluster(await api_client(kubeconfig), b"", timeout)


class Agent:
    def __init__(self, kube: KubeCluster, config: AgentConfig) -> None:
        self.kube = kube
        self.config = config
        self.cache = NodeCache()
        self.sync = ClusterSync(kube, self.cache)
        self.pipeline = Pipeline(config)
        self.committer = Committer(kube, self.cache, self.pipeline)
        self.members = Members(kube, self.cache, self.committer.locks, config)
        self.timings = Timings()
        self.vector = VectorSampler(config, self.cache)

    @classmethod
    async def open(cls, kubeconfig: Obj, config: AgentConfig) -> Agent:
        agent = cls(await connect(kubeconfig, config.commit_timeout), config)
        await agent.sync.start()
        if without := agent.vector.without_vector_form:
            names = ", ".join(f"{name} ({phase})" for phase, name in without)
            log.warning("plugins without a vectorised form are enabled: %s; every pod is "
                        "sampled by the plugin loop, node by node", names)
        if len(agent.cache.names) >= VECTOR_NODES:
            agent.vector.table.fresh()  # built now, not in the first sample's deadline
        return agent

    async def close(self) -> None:
        await self.sync.stop()
        await self.kube.api.close()

    def request(self, pod: Pod) -> PodRequest:
        """The pod as plugins read it; ``InvalidPod`` when a plugin cannot read it."""
        request = PodRequest.of(pod, self.config.namespace)
        self.pipeline.check(request)
        return request

    def sample(self, strategy: str, pod: PodRequest, bp: int | None,
               keep: int | None = None) -> Sample:
        """Np eligible nodes, filtered and scored; ``keep``: only the best few answered."""
        return self.sample_many(strategy, [(pod, bp, keep)])[0]

    def sample_many(self, strategy: str,
                    items: list[tuple[PodRequest, int | None, int | None]]) -> list[Sample]:
        """``sample`` of each (pod, bp, keep), the batch route's work.

        Large clusters and common pods take numpy (``shoal.agent.vector``), all such pods
        of a batch in one set of array operations; the rest take the plugin loop: the same
        answers, at a fraction of the cost per node.
        """
        out: list[Sample | None] = [None] * len(items)
        together: dict[tuple[int, int | None], list[int]] = {}
        vector = len(self.cache.names) >= VECTOR_NODES
        for i, (pod, bp, keep) in enumerate(items):
            bp = bp or self.config.nodes_to_sample_bp
            if vector and self.vector.takes(strategy, pod):
                together.setdefault((bp, keep), []).append(i)
            else:
                found = out[i] = self.pipeline.sample(self.pipeline.strategies[strategy], pod,
                                                      bp, self.cache)
                self.timings.sample.add(found.seconds)
        for (bp, keep), members in together.items():
            started = time.perf_counter()
            wanted = nodes_to_sample(len(self.cache.names), bp)
            answers = self.vector.sample_many([items[i][0] for i in members], wanted, keep)
            seconds = (time.perf_counter() - started) / len(members)
            for i, (nodes, eligible, examined, rejected) in zip(members, answers, strict=True):
                found = out[i] = Sample(wanted, nodes, examined, rejected, seconds=seconds,
                                        eligible=eligible)
                self.timings.sample.add(found.seconds)
        return [found for found in out if found is not None]

    async def commit(self, pod: PodRequest, node: str) -> Committed:
        started = time.perf_counter()
        try:
            return await self.committer.commit(pod, node)
        finally:
            self.timings.commit.add(time.perf_counter() - started)

    def health(self) -> Obj:
        return {"cluster": self.config.cluster, "listed": self.sync.listed,
                "synced": self.sync.synced, **self.cache.stats(),
                "locks": len(self.committer.locks), "timings": self.timings.body()}
