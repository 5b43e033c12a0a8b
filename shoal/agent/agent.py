"""One cluster agent: the member cluster's client, the node cache and its sync, the plugins.

Everything the HTTP routes need, with no HTTP in it.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes_asyncio import config as kube_config

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
from shoal.kube.client import KubeCluster

Obj = dict[str, Any]
VECTOR_NODES = 256  # clusters this large sample with numpy (smaller ones: the plugin loop)


async def connect(kubeconfig: Obj, timeout: float) -> KubeCluster:
    """A client for the member cluster (the kube controller's, without its per-cluster cache)."""
    api = await kube_config.new_client_from_config_dict(kubeconfig)
    return KubeCluster(api, b"", timeout)


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
        """Np eligible nodes, filtered and scored; ``keep``: only the best few answered.

        Large clusters and common pods take numpy (``shoal.agent.vector``), the rest the
        plugin loop: the same answers, at a fraction of the cost per node.
        """
        bp = bp or self.config.nodes_to_sample_bp
        if len(self.cache.names) >= VECTOR_NODES and self.vector.takes(strategy, pod):
            started = time.perf_counter()
            found = Sample(nodes_to_sample(len(self.cache.names), bp))
            found.nodes, found.eligible, found.examined, found.rejected = self.vector.sample(
                pod, found.wanted, keep)
            found.seconds = time.perf_counter() - started
        else:
            found = self.pipeline.sample(self.pipeline.strategies[strategy], pod, bp,
                                         self.cache)
        self.timings.sample.add(found.seconds)
        return found

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
