"""The agent's scheduling framework: sampling strategies, filters and scores, by name.

As in the Kubernetes scheduling framework (and ``shoal.scheduler.framework``):
each plugin does one thing, is registered by name, and is enabled in
configuration. One instance of each plugin serves every request, so a
strategy keeps state across requests (round-robin advances its index for all
of them). A sample draws nodes from the strategy and runs the filters and
scores on each until Np eligible nodes are found, the strategy has no node
left, or the deadline passes. The loop never awaits: a sample sees one
consistent cache, and concurrent samples never interleave their draws.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from shoal.agent.cache import NodeCache, NodeInfo
from shoal.agent.config import AgentConfig
from shoal.agent.pod import PodRequest
from shoal.agent.table import Batch
from shoal.machinery.plugins import Registry
from shoal.machinery.types import Obj

FULL_BP = 10_000
DEADLINE_EVERY = 64  # nodes between two looks at the clock


class InvalidPod(ValueError):
    """A pod a plugin cannot read; answered as 422 naming ``field``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class Plugin:
    name: ClassVar[str]

    def __init__(self, config: AgentConfig) -> None:
        self.config = config

    def check(self, pod: PodRequest) -> None:
        """Raise ``InvalidPod`` for a pod this plugin cannot read (once per request)."""


class SamplingStrategy(Plugin):
    def nodes(self, names: Sequence[str]) -> Iterator[str]:
        """Node names to look at, each at most once."""
        raise NotImplementedError


Reject = Callable[[np.ndarray, str], None]
"""``reject(mask, reason)``: the drawn nodes of ``mask`` (pods × nodes) not yet rejected
are rejected for ``reason``."""


class FilterPlugin(Plugin):
    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        """Why ``node`` cannot take ``pod``, or None when it can."""
        raise NotImplementedError

    def vector_filter(self, batch: Batch, order: np.ndarray, reject: Reject) -> None:
        """The numpy form of ``filter``, over the nodes ``order`` (a row of node-table rows
        per pod of ``batch``): ``reject`` each mask of nodes with the reason ``filter``
        gives, in its order. A plugin without one sends every pod to the plugin loop."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    def score(self, pod: PodRequest, node: NodeInfo) -> float | None:
        """0–100, or None when the plugin has nothing to say about this pod."""
        raise NotImplementedError

    def vector_score(self, batch: Batch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The numpy form of ``score`` over the nodes ``rows`` (a row per pod): (scores, where
        the plugin has something to say), or None when it has nothing to say to any pod. A
        plugin without one sends every pod to the plugin loop."""
        raise NotImplementedError


def has_vector_form(plugin: Plugin, phase: str) -> bool:
    """Whether ``plugin`` carries the numpy form of its ``phase`` (filters, scores)."""
    base, method = (
        (FilterPlugin, "vector_filter") if phase == "filters" else (ScorePlugin, "vector_score")
    )
    return getattr(type(plugin), method) is not getattr(base, method)


PLUGINS: Registry[Plugin] = Registry("the agent", ("sampling", "filters", "scores"))
register = PLUGINS.register


def nodes_to_sample(total: int, bp: int) -> int:
    """Np of ``total`` nodes: ``bp`` basis points (capped at all of them), at least one."""
    return max(1, math.ceil(total * min(bp, FULL_BP) / FULL_BP)) if total else 0


@dataclass
class Sample:
    wanted: int
    nodes: list[Obj] = field(default_factory=list)
    examined: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    timed_out: bool = False
    seconds: float = 0.0
    eligible: int = -1  # when ``nodes`` holds only the best few of them (numpy path)

    def body(self, cluster: str, keep: int | None = None) -> Obj:
        """The answer; ``keep``: only the best-scored few of the nodes found (fewer bytes)."""
        nodes = self.nodes
        if keep is not None and len(nodes) > keep:
            nodes = sorted(nodes, key=lambda node: -node["score"])[:keep]
        eligible = self.eligible if self.eligible >= 0 else len(self.nodes)
        out: Obj = {"cluster": cluster, "nodes": nodes, "wanted": self.wanted,
                    "examined": self.examined, "eligible": eligible,
                    "samplingMs": round(self.seconds * 1000, 3)}
        if eligible < self.wanted:
            out["explanation"] = self.explanation()
        return out

    def explanation(self) -> Obj:
        reasons = sorted(self.rejected.items(), key=lambda kv: -kv[1])
        eligible = self.eligible if self.eligible >= 0 else len(self.nodes)
        summary = f"{eligible}/{self.examined} examined nodes eligible"
        if reasons:
            summary += ": " + ", ".join(f"{count} {reason}" for reason, count in reasons)
        if self.timed_out:
            summary += " (deadline reached)"
        return {"summary": summary, "rejected": dict(reasons), "timedOut": self.timed_out}


class Pipeline:
    """The enabled plugins, built once from the configuration."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        built: dict[str, Plugin] = {}
        plugins = config.plugins
        self.strategies = {n: PLUGINS.make(n, "sampling", SamplingStrategy, config, built=built)
                           for n in plugins.sampling}
        self.filters = [PLUGINS.make(n, "filters", FilterPlugin, config, built=built)
                        for n in plugins.filters]
        self.scores = [(PLUGINS.make(n, "scores", ScorePlugin, config, built=built), w)
                       for n, w in plugins.scores.items() if w > 0]
        self.checks = list(built.values())

    def check(self, pod: PodRequest) -> None:
        for plugin in self.checks:
            plugin.check(pod)

    def reject(self, pod: PodRequest, node: NodeInfo) -> str | None:
        for plugin in self.filters:
            reason = plugin.filter(pod, node)
            if reason is not None:
                return reason
        return None

    def score(self, pod: PodRequest, node: NodeInfo) -> int:
        total = weights = 0.0
        for plugin, weight in self.scores:
            value = plugin.score(pod, node)
            if value is not None:
                total += weight * value
                weights += weight
        return round(total / weights) if weights else 0

    def sample(self, strategy: SamplingStrategy, pod: PodRequest, bp: int,
               cache: NodeCache) -> Sample:
        started = time.perf_counter()
        deadline = started + self.config.sample_timeout
        names = cache.names
        result = Sample(nodes_to_sample(len(names), bp))
        if not result.wanted:
            return result
        for name in strategy.nodes(names):
            if result.examined % DEADLINE_EVERY == DEADLINE_EVERY - 1 and (
                time.perf_counter() > deadline
            ):
                result.timed_out = True
                break
            node = cache.nodes.get(name)
            if node is None:
                continue
            result.examined += 1
            reason = self.reject(pod, node)
            if reason is not None:
                result.rejected[reason] = result.rejected.get(reason, 0) + 1
                continue
            result.nodes.append({"name": name, "score": self.score(pod, node),
                                 "available": node.available(), "total": node.allocatable})
            if len(result.nodes) >= result.wanted:
                break  # before drawing another: round-robin advances only past nodes looked at
        result.seconds = time.perf_counter() - started
        return result
