"""Random samples of a large cluster, filtered and scored with numpy instead of node by node.

Same answers as the plugin loop of ``shoal.agent.framework`` (the same
filters in the configured order, the same reasons, the same scores; a test
holds the two to it), for the common case: the ``random`` strategy, the
built-in plugins, and a pod with no node selector or tolerations that asks
only for cpu, memory and pods. Any other pod takes the plugin loop. The
node table mirrors the cache: rebuilt when a node changes, and only the rows
of nodes whose requests changed since the last sample are refreshed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from shoal.agent.cache import NodeCache
from shoal.agent.config import AgentConfig
from shoal.agent.plugins.geo import EARTH_RADIUS_KM, LOCATION, MAX_DISTANCE, TARGET, lat_long
from shoal.agent.plugins.nodes import HARD_EFFECTS
from shoal.agent.pod import PodRequest

Obj = dict[str, Any]
RESOURCES = ("cpu", "memory", "pods")
FILTERS = {"node-ready", "node-selector", "taint-toleration", "resources-fit", "geo-location"}
SCORES = {"least-allocated", "most-allocated", "geo-location"}


class NodeTable:
    """The cache's nodes as arrays, in the order of ``cache.names``."""

    def __init__(self, cache: NodeCache) -> None:
        self.cache = cache
        self.version = -1
        self.names: tuple[str, ...] = ()
        self.index: dict[str, int] = {}
        self.alloc = np.zeros((3, 0))
        self.req = np.zeros((3, 0))
        self.unready = np.zeros(0, bool)
        self.cordoned = np.zeros(0, bool)
        self.taint: list[str | None] = []
        self.tainted = np.zeros(0, bool)
        self.lat = np.zeros(0)
        self.lon = np.zeros(0)

    def fresh(self) -> NodeTable:
        cache = self.cache
        if cache.version != self.version or cache.names is not self.names:
            self._build()
        elif cache.dirty:
            for name in cache.dirty:
                i = self.index.get(name)
                if i is not None:
                    self._requests(i, name)
            cache.dirty.clear()
        return self

    def _requests(self, i: int, name: str) -> None:
        requested = self.cache.requested.get(name) or {}
        for r, resource in enumerate(RESOURCES):
            self.req[r, i] = requested.get(resource, 0)

    def _build(self) -> None:
        cache = self.cache
        cache.dirty.clear()
        self.version, self.names = cache.version, cache.names
        n = len(self.names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.alloc, self.req = np.zeros((3, n)), np.zeros((3, n))
        self.unready, self.cordoned = np.zeros(n, bool), np.zeros(n, bool)
        self.taint = [None] * n
        self.lat, self.lon = np.full(n, np.nan), np.full(n, np.nan)
        for i, name in enumerate(self.names):
            node = cache.nodes[name]
            for r, resource in enumerate(RESOURCES):
                self.alloc[r, i] = node.allocatable.get(resource, 0)
            self._requests(i, name)
            self.unready[i], self.cordoned[i] = not node.ready, node.unschedulable
            hard = [t for t in node.taints if t.get("effect") in HARD_EFFECTS]
            self.taint[i] = f"untolerated taint {hard[0].get('key')}" if hard else None
            here = lat_long(node.labels.get(LOCATION, ""))
            if here is not None:
                self.lat[i], self.lon[i] = here
        self.tainted = np.array([t is not None for t in self.taint], bool)


class VectorSampler:
    def __init__(self, config: AgentConfig, cache: NodeCache) -> None:
        self.config = config
        plugins = config.plugins
        self.filters = list(plugins.filters)
        self.scores = {n: w for n, w in plugins.scores.items() if w > 0}
        self.usable = set(self.filters) <= FILTERS and set(self.scores) <= SCORES
        self.table = NodeTable(cache)
        self.random = np.random.default_rng()

    def takes(self, strategy: str, pod: PodRequest) -> bool:
        return (self.usable and strategy == "random" and not pod.node_selector
                and not pod.tolerations and set(pod.requests) <= set(RESOURCES))

    def _geo(self, pod: PodRequest) -> tuple[float, float, float] | None:
        text = pod.labels.get(TARGET)
        target = lat_long(text) if text is not None else None
        if target is None:
            return None
        limit = float(pod.labels.get(MAX_DISTANCE, self.config.geo_max_distance_km))
        return target[0], target[1], limit

    def sample(self, pod: PodRequest, wanted: int, keep: int | None) -> tuple[
            list[Obj], int, int, dict[str, int]]:
        """(the best ``keep`` eligible nodes as answered, eligible, examined, rejected).

        A random draw of a few times Np nodes first (most samples end there); the rest of
        the cluster, in random order, only when that draw held too few eligible nodes.
        """
        table = self.table.fresh()
        n = len(table.names)
        geo = self._geo(pod)
        first = min(n, 4 * wanted + 32)
        order = self._draw(n, first)
        code, reasons = self._codes(table, order, pod, geo)
        if first < n and np.count_nonzero(code == 0) < wanted:
            rest = np.setdiff1d(np.arange(n), order, assume_unique=True)
            self.random.shuffle(rest)
            order = np.concatenate([order, rest])
            code = np.concatenate([code, self._codes(table, rest, pod, geo)[0]])
        eligible = np.flatnonzero(code == 0)
        if len(eligible) >= wanted:
            examined = int(eligible[wanted - 1]) + 1
            eligible = eligible[:wanted]
        else:
            examined = n
        rejected: dict[str, int] = {}
        counts = np.bincount(code[:examined], minlength=len(reasons) + 1)
        for i, reason in enumerate(reasons, 1):
            if counts[i] and reason == "untolerated taint":
                for j in np.flatnonzero(code[:examined] == i):
                    key = table.taint[order[j]] or reason
                    rejected[key] = rejected.get(key, 0) + 1
            elif counts[i]:
                rejected[reason] = rejected.get(reason, 0) + int(counts[i])
        rows = order[eligible]
        need = np.array([pod.requests.get(r, 0) for r in RESOURCES], float)[:, None]
        scores = self._scores(table, rows, need, geo)
        best = np.argsort(-scores, kind="stable")[:keep] if keep else np.arange(len(rows))
        nodes = []
        for j in best:
            node = self.table.cache.nodes[table.names[rows[j]]]
            nodes.append({"name": node.name, "score": int(scores[j]),
                          "available": node.available(), "total": node.allocatable})
        return nodes, len(rows), examined, rejected

    def _draw(self, n: int, count: int) -> np.ndarray:
        """``count`` distinct nodes of ``n`` in random order: the first occurrences of uniform
        draws (cheaper than ``choice`` without replacement, which shuffles all ``n``)."""
        if count * 4 > n:
            return self.random.permutation(n)[:count]
        drawn = self.random.integers(0, n, size=count + count // 4 + 8)
        _, first = np.unique(drawn, return_index=True)
        order: np.ndarray = drawn[np.sort(first)][:count]
        return order

    def _codes(self, table: NodeTable, order: np.ndarray, pod: PodRequest,
               geo: tuple[float, float, float] | None) -> tuple[np.ndarray, list[str]]:
        """Per node of ``order``: 0 when eligible, else 1 + the index of its first reason."""
        code = np.zeros(len(order), np.int16)
        reasons: list[str] = []

        def reject(mask: np.ndarray, reason: str) -> None:
            reasons.append(reason)
            np.putmask(code, (code == 0) & mask, len(reasons))

        for name in self.filters:
            if name == "node-ready":
                reject(table.unready[order], "node not ready")
                reject(table.cordoned[order], "node unschedulable")
            elif name == "taint-toleration":
                reject(table.tainted[order], "untolerated taint")
            elif name == "resources-fit":
                for resource, value in pod.requests.items():  # the order ``fits`` checks
                    if value:
                        r = RESOURCES.index(resource)
                        over = table.req[r, order] + value > table.alloc[r, order]
                        reject(over, f"insufficient {resource}")
            elif name == "geo-location" and geo is not None:  # the filter's
                distance = self._distance(table, order, geo)
                reject(np.isnan(distance), "no node location")
                reject(distance > geo[2], f"farther than {geo[2]:g} km")
        return code, reasons

    @staticmethod
    def _distance(table: NodeTable, rows: np.ndarray, geo: tuple[float, float, float]
                  ) -> np.ndarray:
        lat, lon = table.lat[rows], table.lon[rows]
        h = (np.sin((lat - geo[0]) / 2) ** 2
             + math.cos(geo[0]) * np.cos(lat) * np.sin((lon - geo[1]) / 2) ** 2)
        result: np.ndarray = 2 * EARTH_RADIUS_KM * np.arcsin(np.minimum(1.0, np.sqrt(h)))
        return result

    def _scores(self, table: NodeTable, rows: np.ndarray, need: np.ndarray,
                geo: tuple[float, float, float] | None) -> np.ndarray:
        total, weights = np.zeros(len(rows)), np.zeros(len(rows))
        alloc, used = table.alloc[:2, rows], table.req[:2, rows] + need[:2]
        has = alloc > 0
        fraction = np.clip(np.divide(used, alloc, out=np.zeros_like(used), where=has), 0, 1)
        counted = has.sum(axis=0)
        mean = np.divide(fraction.sum(axis=0), counted, out=np.zeros(len(rows)),
                         where=counted > 0)
        for name, weight in self.scores.items():
            if name in ("least-allocated", "most-allocated"):
                value = 100 * (1 - mean) if name == "least-allocated" else 100 * mean
                total += weight * np.where(counted > 0, value, 0)
                weights += weight * (counted > 0)
            elif name == "geo-location" and geo is not None:
                distance = self._distance(table, rows, geo)
                total += weight * np.ceil(100 - 99 * distance / geo[2])
                weights += weight
        out: np.ndarray = np.where(weights > 0, np.rint(np.divide(
            total, weights, out=np.zeros(len(rows)), where=weights > 0)), 0)
        return out
