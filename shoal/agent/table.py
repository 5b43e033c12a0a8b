"""The node cache as arrays, and a batch of pods sampled together, for the numpy path.

The vectorised forms of the agent's plugins (``vector_filter``, ``vector_score``) read
these; ``shoal.agent.vector`` draws the nodes and runs them. The node table mirrors the
cache: rebuilt when a node changes, and only the rows of nodes whose requests changed
since the last sample are refreshed.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from shoal.agent.cache import HARD_EFFECTS, NodeCache
from shoal.agent.places import EARTH_RADIUS_KM, LOCATION, lat_long
from shoal.agent.pod import PodRequest
from shoal.machinery.resources import Amounts
from shoal.machinery.types import Obj

RESOURCES = ("cpu", "memory", "pods")
TAINT = "untolerated taint"
TARGETS_KEPT = 256  # geo targets whose distances to every node are kept
FARTHER = "farther"  # "farther than N km", N the pod's own limit
Found = tuple[list[Obj], int, int, dict[str, int]]  # nodes answered, eligible, examined, rejected


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
        self.taints: list[str] = []  # the reasons of taint_id 1, 2, …
        self.taint_id = np.zeros(0, np.int64)
        self.lat = np.zeros(0)
        self.lon = np.zeros(0)
        self.answers: dict[int, tuple[Amounts, Amounts]] = {}  # (available, total) by row
        self.targets: dict[tuple[float, float], np.ndarray] = {}  # km to every node

    def fresh(self) -> NodeTable:
        cache = self.cache
        if cache.version != self.version or cache.names is not self.names:
            self._build()
        elif cache.dirty:
            for name in cache.dirty:
                i = self.index.get(name)
                if i is not None:
                    self._requests(i, name)
                    self.answers.pop(i, None)
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
        self.taints = sorted({t for t in self.taint if t is not None})
        ids = {t: k for k, t in enumerate(self.taints, 1)}
        self.taint_id = np.array([ids.get(t or "", 0) for t in self.taint], np.int64)
        self.answers = {}
        self.targets = {}

    def distances(self, lat: float, lon: float) -> np.ndarray:
        """Great-circle km from (lat, lon) to every node, once per target: pods aim at a few
        places, and a pod far from most nodes looks at the whole cluster."""
        found = self.targets.get((lat, lon))
        if found is None:
            h = (np.sin((self.lat - lat) / 2) ** 2
                 + math.cos(lat) * np.cos(self.lat) * np.sin((self.lon - lon) / 2) ** 2)
            found = 2 * EARTH_RADIUS_KM * np.arcsin(np.minimum(1.0, np.sqrt(h)))
            if len(self.targets) >= TARGETS_KEPT:
                self.targets.clear()
            self.targets[(lat, lon)] = found
        return found

    def answer(self, row: int) -> tuple[Amounts, Amounts]:
        """A node's (available, total) as answered, made once until its requests change."""
        found = self.answers.get(row)
        if found is None:
            node = self.cache.nodes[self.names[row]]
            found = self.answers[row] = (node.available(), node.allocatable)
        return found


class Batch:
    """Pods sampled together (asking for the same resources), as arrays with a row per pod."""

    def __init__(self, table: NodeTable, pods: list[PodRequest], resources: tuple[str, ...],
                 geo: list[tuple[float, float, float] | None]) -> None:
        self.table = table
        self.pods = pods
        self.resources = resources
        self.need = np.array([[p.requests[r] for r in resources] for p in pods], float)
        self.need = self.need.reshape(len(pods), len(resources))
        self.full = np.array([[p.requests.get(r, 0) for r in RESOURCES] for p in pods], float)
        self.geo = np.array([g is not None for g in geo], bool)
        self.target = np.array([g or (0.0, 0.0, 1.0) for g in geo], float).reshape(-1, 3)
        self.reasons: list[str] = []

    def only(self, *rows: int) -> Batch:
        part = copy.copy(self)
        part.pods = [self.pods[i] for i in rows]
        picked = list(rows)
        part.need, part.full = self.need[picked], self.full[picked]
        part.geo, part.target = self.geo[picked], self.target[picked]
        return part

    def found(self, order: np.ndarray, code: np.ndarray, upto: np.ndarray, rows: np.ndarray,
              have: np.ndarray, scores: np.ndarray, keep: int | None) -> list[Found]:
        """Each pod's answer: ``upto`` marks the nodes it examined, the first ``have`` of its
        ``rows`` are its eligible ones and ``scores`` theirs."""
        pods, width = len(order), len(self.reasons) + 2
        shifted = np.where(upto, code + 1, 0) + np.arange(pods)[:, None] * width
        counts = np.bincount(shifted.ravel(), minlength=pods * width).reshape(pods, width)
        best = np.argsort(-scores, axis=1, kind="stable")[:, :keep or rows.shape[1]]
        eligible = have.tolist()
        table = self.table
        taints = self._taints(order, code, upto).tolist() if TAINT in self.reasons else None
        counted, best_of, rows_of, scores_of = (counts.tolist(), best.tolist(), rows.tolist(),
                                                scores.tolist())
        out: list[Found] = []
        for i in range(pods):  # plain lists: a numpy scalar per element costs more than this
            rejected: dict[str, int] = {}
            mine = counted[i]
            for k, reason in enumerate(self.reasons, 2):
                count = mine[k]
                if not count:
                    continue
                if reason == TAINT and taints is not None:  # by the taint's key
                    for t, by in enumerate(taints[i]):
                        if by:
                            rejected[table.taints[t - 1]] = by
                    continue
                if reason == FARTHER:
                    reason = f"farther than {self.target[i, 2]:g} km"
                rejected[reason] = rejected.get(reason, 0) + count
            answered = []
            for j in best_of[i][:eligible[i]]:
                row = rows_of[i][j]
                available, total = table.answer(row)
                answered.append({"name": table.names[row], "score": int(scores_of[i][j]),
                                 "available": available, "total": total})
            out.append((answered, eligible[i], sum(mine[1:]), rejected))
        return out

    def _taints(self, order: np.ndarray, code: np.ndarray, upto: np.ndarray) -> np.ndarray:
        """Per pod, how many examined nodes each taint (``taint_id``) turned away."""
        width = len(self.table.taints) + 1
        pods, nodes = np.nonzero(upto & (code == self.reasons.index(TAINT) + 1))
        ids = self.table.taint_id[order[pods, nodes]] + pods * width
        counts: np.ndarray = np.bincount(ids, minlength=len(order) * width).reshape(-1, width)
        return counts

    def distance(self, rows: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Km from each row's target (latitude, longitude, limit) to the nodes of its row."""
        if not len(rows):
            return np.zeros(rows.shape)
        return np.stack([self.table.distances(float(t[0]), float(t[1]))[row]
                         for row, t in zip(rows, target, strict=True)])
