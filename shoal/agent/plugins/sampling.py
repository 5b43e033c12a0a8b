"""Sampling strategies: which nodes a sample looks at, each at most once."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from shoal.agent.config import AgentConfig
from shoal.agent.framework import SamplingStrategy, register


@register("sampling")
class RandomSampling(SamplingStrategy):
    """A uniformly random order, drawn lazily (Fisher–Yates on a sparse swap table).

    O(1) per node drawn and no copy of the node list, however large the cluster.
    """

    name = "random"

    def __init__(self, config: AgentConfig) -> None:
        super().__init__(config)
        self.random = random.Random()

    def nodes(self, names: Sequence[str]) -> Iterator[str]:
        total = len(names)
        swapped: dict[int, int] = {}
        for i in range(total):
            j = self.random.randrange(i, total)
            yield names[swapped.get(j, j)]
            swapped[j] = swapped.get(i, i)


@register("sampling")
class RoundRobinSampling(SamplingStrategy):
    """Nodes in order from where the last request stopped.

    The index is the plugin's, shared by every request: two requests in a row
    get different nodes, and consecutive requests cover the whole cluster.
    """

    name = "round-robin"

    def __init__(self, config: AgentConfig) -> None:
        super().__init__(config)
        self.next = 0

    def nodes(self, names: Sequence[str]) -> Iterator[str]:
        total = len(names)
        for _ in range(total):
            i = self.next % total
            self.next = i + 1
            yield names[i]
