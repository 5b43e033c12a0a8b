"""The decision phase: merge the samples, filter and score with the scheduler's plugins, keep k.

Vela kept the lowest-scored candidates (it sorted ascending); here the k
highest come first, ties broken at random. A round decides a whole batch and
books each pod's first choice on its node, so the pods of one batch do not
all pick the one node that looked emptiest.
"""

from __future__ import annotations

import random
import time

from shoal.machinery.resources import add
from shoal.model.scheduler_config import FleetConfig
from shoal.scheduler.framework import make_plugin
from shoal.scheduler.pods.plugins import PodFilterPlugin, PodScorePlugin
from shoal.scheduler.pods.work import Candidate, PodWork


class Decider:
    def __init__(self, config: FleetConfig) -> None:
        self.k = config.candidates
        self.filters = [
            make_plugin(name, "pod-filters", PodFilterPlugin) for name in config.filters
        ]
        self.scores = [(make_plugin(name, "pod-scores", PodScorePlugin), weight)
                       for name, weight in config.scores.items() if weight > 0]
        self.random = random.Random()

    def decide(self, batch: list[PodWork]) -> None:
        """Rank each pod's candidates (best first, at most k) and explain the round."""
        taken: dict[tuple[str, str], dict[str, int]] = {}
        for work in batch:
            started = time.perf_counter()
            kept: list[tuple[float, float, Candidate]] = []
            rejected: dict[str, int] = {}
            for node in work.candidates:
                reason = next((r for f in self.filters
                               if (r := f.filter(work, node, taken)) is not None), None)
                if reason is not None:
                    rejected[reason] = rejected.get(reason, 0) + 1
                    continue
                kept.append((self._score(work, node), self.random.random(), node))
            kept.sort(key=lambda item: (item[0], item[1]), reverse=True)
            work.candidates = [node for _, _, node in kept[: self.k]]
            if work.candidates:
                first = work.candidates[0]
                add(taken.setdefault((first.cluster, first.node), {}), work.requests)
            summary = f"{len(kept)} of {len(kept) + sum(rejected.values())} sampled nodes kept"
            if rejected:
                summary += " (" + ", ".join(f"{n} {r}" for r, n in rejected.items()) + ")"
            best = ", ".join(f"{c.cluster}/{c.node} {s:.0f}" for s, _, c in kept[: self.k])
            work.explanation["decision"] = {
                "summary": summary + (f"; candidates: {best}" if best else "; no candidate"),
                "candidates": [{"cluster": c.cluster, "node": c.node, "score": round(s, 2)}
                               for s, _, c in kept[: self.k]],
                "rejected": rejected,
            }
            work.timings["decision"] = time.perf_counter() - started

    def _score(self, work: PodWork, node: Candidate) -> float:
        total = weights = 0.0
        for plugin, weight in self.scores:
            total += weight * plugin.score(work, node)
            weights += weight
        return total / weights if weights else 0.0
