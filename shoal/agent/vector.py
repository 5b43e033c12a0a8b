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

import copy
import math

import numpy as np

from shoal.agent.cache import NodeCache
from shoal.agent.config import AgentConfig
from shoal.agent.plugins.geo import EARTH_RADIUS_KM, LOCATION, MAX_DISTANCE, TARGET, lat_long
from shoal.agent.plugins.nodes import HARD_EFFECTS
from shoal.agent.pod import PodRequest
from shoal.machinery.resources import Amounts
from shoal.machinery.types import Obj

RESOURCES = ("cpu", "memory", "pods")
FILTERS = {"node-ready", "node-selector", "taint-toleration", "resources-fit", "geo-location"}
SCORES = {"least-allocated", "most-allocated", "geo-location"}
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


class _Batch:
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

    def only(self, *rows: int) -> _Batch:
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


class VectorSampler:
    def __init__(self, config: AgentConfig, cache: NodeCache) -> None:
        self.config = config
        plugins = config.plugins
        self.filters = list(plugins.filters)
        self.scores = {n: w for n, w in plugins.scores.items() if w > 0}
        # (phase, plugin) of each enabled filter and score with no numpy form here: while
        # any is enabled, every pod takes the plugin loop, node by node.
        self.without_vector_form = [("filters", n) for n in self.filters if n not in FILTERS] + [
            ("scores", n) for n in self.scores if n not in SCORES
        ]
        self.usable = not self.without_vector_form
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

    def sample(self, pod: PodRequest, wanted: int, keep: int | None) -> Found:
        """(the best ``keep`` eligible nodes as answered, eligible, examined, rejected)."""
        return self.sample_many([pod], wanted, keep)[0]

    def sample_many(self, pods: list[PodRequest], wanted: int, keep: int | None
                    ) -> list[Found]:
        """``sample`` of each pod, a whole batch in one set of array operations.

        Pods are grouped by the resources they ask for (the order of their reasons); each
        group draws a matrix of nodes, one row per pod, and filters and scores it at once.
        """
        table = self.table.fresh()
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, pod in enumerate(pods):
            groups.setdefault(tuple(r for r, v in pod.requests.items() if v), []).append(i)
        out: list[Found | None] = [None] * len(pods)
        for resources, members in groups.items():
            batch = _Batch(table, [pods[i] for i in members], resources,
                           [self._geo(pods[i]) for i in members])
            for i, found in zip(members, self._sample(batch, wanted, keep), strict=True):
                out[i] = found
        return [found for found in out if found is not None]

    def _sample(self, batch: _Batch, wanted: int, keep: int | None) -> list[Found]:
        """A random draw of a few times Np nodes per pod first (most samples end there); the
        whole cluster, in a random order of its own, for the pods whose draw held too few."""
        n = len(batch.table.names)
        first = min(n, 4 * wanted + 32)
        order, valid = self._draw(n, first, len(batch.pods))
        out = self._answer(batch, order, valid, wanted, keep, whole=first == n)
        short = [i for i, found in enumerate(out) if found is None]
        if short:
            order = self.random.permuted(np.tile(np.arange(n), (len(short), 1)), axis=1)
            again = self._answer(batch.only(*short), order, np.ones(order.shape, bool), wanted,
                                 keep, whole=True)
            for i, found in zip(short, again, strict=True):
                out[i] = found
        return [found for found in out if found is not None]

    def _answer(self, batch: _Batch, order: np.ndarray, valid: np.ndarray, wanted: int,
                keep: int | None, whole: bool) -> list[Found | None]:
        """Each pod's answer from its row of ``order``; None for a pod with fewer than
        ``wanted`` eligible nodes there, unless the rows hold the ``whole`` cluster."""
        code = self._codes(batch, order, valid)
        eligible = code == 0
        seen = np.cumsum(eligible, axis=1)
        have = np.minimum(seen[:, -1], wanted)
        enough = have >= wanted
        if not whole and not enough.all():
            rows = np.flatnonzero(enough)
            done = self._answer(batch.only(*rows), order[rows], valid[rows], wanted, keep,
                                whole) if len(rows) else []
            out: list[Found | None] = [None] * len(order)
            for i, found in zip(rows, done, strict=True):
                out[i] = found
            return out
        last = np.where(enough, np.argmax(seen >= wanted, axis=1), order.shape[1] - 1)
        upto = (np.arange(order.shape[1])[None, :] <= last[:, None]) & valid
        taken = eligible & (seen <= wanted)  # each row's first ``have`` eligible nodes
        if enough.all():
            rows = order[taken].reshape(-1, wanted)
        else:
            first = np.argsort(~taken, axis=1, kind="stable")[:, :wanted]
            rows = np.take_along_axis(order, first, axis=1)
        scores = self._scores(batch, rows)
        scores[np.arange(wanted)[None, :] >= have[:, None]] = -np.inf  # not eligible: last
        return list(batch.found(order, code, upto, rows, have, scores, keep))

    def _draw(self, n: int, count: int, pods: int) -> tuple[np.ndarray, np.ndarray]:
        """Per pod (row), ``count`` distinct nodes of ``n`` in random order: (nodes, valid).

        Uniform draws with the repeats of a row marked invalid (cheaper than a permutation
        of all ``n`` per pod); a permutation when ``count`` is a large share of ``n``.
        """
        if count * 4 > n:
            order = self.random.permuted(np.tile(np.arange(n), (pods, 1)), axis=1)[:, :count]
            return order, np.ones(order.shape, bool)
        drawn = self.random.integers(0, n, size=(pods, count + count // 4 + 8))
        by = np.argsort(drawn, axis=1, kind="stable")
        ranked = np.take_along_axis(drawn, by, axis=1)
        first = np.ones(drawn.shape, bool)
        first[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
        valid = np.empty(drawn.shape, bool)
        np.put_along_axis(valid, by, first, axis=1)
        valid &= np.cumsum(valid, axis=1) <= count
        return drawn, valid

    def _codes(self, batch: _Batch, order: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Per pod and drawn node: 0 when eligible, -1 when not drawn, else 1 + the index of
        its first reason in ``batch.reasons``."""
        table = batch.table
        code = np.where(valid, 0, -1).astype(np.int16)
        reasons: list[str] = []

        def reject(mask: np.ndarray, reason: str) -> None:
            reasons.append(reason)
            np.putmask(code, (code == 0) & mask, len(reasons))

        for name in self.filters:
            if name == "node-ready":
                reject(table.unready[order], "node not ready")
                reject(table.cordoned[order], "node unschedulable")
            elif name == "taint-toleration":
                reject(table.tainted[order], TAINT)
            elif name == "resources-fit":
                for r, resource in enumerate(batch.resources):  # the order ``fits`` checks
                    row = RESOURCES.index(resource)
                    over = table.req[row][order] + batch.need[:, r, None] > table.alloc[row][
                        order]
                    reject(over, f"insufficient {resource}")
            elif name == "geo-location" and batch.geo.any():  # the filter's, on pods with a target
                distance = np.full(order.shape, np.inf)
                distance[batch.geo] = self._distance(table, order[batch.geo],
                                                     batch.target[batch.geo])
                near = batch.geo[:, None]
                reject(near & np.isnan(distance), "no node location")
                reject(near & (distance > batch.target[:, 2, None]), FARTHER)
        batch.reasons = reasons
        return code

    def _scores(self, batch: _Batch, rows: np.ndarray) -> np.ndarray:
        """Scores of the nodes ``rows`` (one row of nodes per pod), as the plugins give them."""
        table = batch.table
        shape = rows.shape
        total, weights = np.zeros(shape), np.zeros(shape)
        alloc = table.alloc[:2][:, rows]
        used = table.req[:2][:, rows] + batch.full[:, :2].T[:, :, None]
        has = alloc > 0
        fraction = np.clip(np.divide(used, alloc, out=np.zeros_like(used), where=has), 0, 1)
        counted = has.sum(axis=0)
        mean = np.divide(fraction.sum(axis=0), counted, out=np.zeros(shape), where=counted > 0)
        for name, weight in self.scores.items():
            if name in ("least-allocated", "most-allocated"):
                value = 100 * (1 - mean) if name == "least-allocated" else 100 * mean
                total += weight * np.where(counted > 0, value, 0)
                weights += weight * (counted > 0)
            elif name == "geo-location" and batch.geo.any():
                geo = batch.geo
                distance = self._distance(table, rows[geo], batch.target[geo])
                total[geo] += weight * np.ceil(100 - 99 * distance / batch.target[geo, 2, None])
                weights[geo] += weight
        out: np.ndarray = np.where(weights > 0, np.rint(np.divide(
            total, weights, out=np.zeros(shape), where=weights > 0)), 0)
        return out

    @staticmethod
    def _distance(table: NodeTable, rows: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Km from each row's target (latitude, longitude, limit) to the nodes of its row."""
        if not len(rows):
            return np.zeros(rows.shape)
        return np.stack([table.distances(float(t[0]), float(t[1]))[row]
                         for row, t in zip(rows, target, strict=True)])
