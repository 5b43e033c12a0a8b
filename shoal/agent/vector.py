"""Random samples of a large cluster, filtered and scored with numpy instead of node by node.

Same answers as the plugin loop of ``shoal.agent.framework`` (the same
filters in the configured order, the same reasons, the same scores; a test
holds the two to it), for the common case: the ``random`` strategy, plugins that
carry their own numpy form (``vector_filter``, ``vector_score``: every built-in one
does), and a pod with no node selector or tolerations that asks only for cpu, memory
and pods. Any other pod takes the plugin loop. The arrays are ``shoal.agent.table``'s.
"""

from __future__ import annotations

import numpy as np

from shoal.agent.cache import NodeCache
from shoal.agent.config import AgentConfig
from shoal.agent.framework import (
    PLUGINS,
    FilterPlugin,
    Plugin,
    ScorePlugin,
    has_vector_form,
)
from shoal.agent.places import MAX_DISTANCE, TARGET, lat_long
from shoal.agent.pod import PodRequest
from shoal.agent.table import RESOURCES, Batch, Found, NodeTable


class VectorSampler:
    def __init__(self, config: AgentConfig, cache: NodeCache) -> None:
        self.config = config
        plugins = config.plugins
        self.filters = list(plugins.filters)
        self.scores = {n: w for n, w in plugins.scores.items() if w > 0}
        built: dict[str, Plugin] = {}
        self.filter_plugins = [PLUGINS.make(n, "filters", FilterPlugin, config, built=built)
                               for n in self.filters]
        self.score_plugins = [(PLUGINS.make(n, "scores", ScorePlugin, config, built=built), w)
                              for n, w in self.scores.items()]
        # (phase, plugin) of each enabled filter and score with no numpy form: while any is
        # enabled, every pod takes the plugin loop, node by node.
        self.without_vector_form = [
            ("filters", p.name) for p in self.filter_plugins if not has_vector_form(p, "filters")
        ] + [("scores", p.name) for p, _ in self.score_plugins if not has_vector_form(p, "scores")]
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
            batch = Batch(table, [pods[i] for i in members], resources,
                           [self._geo(pods[i]) for i in members])
            for i, found in zip(members, self._sample(batch, wanted, keep), strict=True):
                out[i] = found
        return [found for found in out if found is not None]

    def _sample(self, batch: Batch, wanted: int, keep: int | None) -> list[Found]:
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

    def _answer(self, batch: Batch, order: np.ndarray, valid: np.ndarray, wanted: int,
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

    def _codes(self, batch: Batch, order: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Per pod and drawn node: 0 when eligible, -1 when not drawn, else 1 + the index of
        its first reason in ``batch.reasons``."""
        code = np.where(valid, 0, -1).astype(np.int16)
        reasons: list[str] = []

        def reject(mask: np.ndarray, reason: str) -> None:
            reasons.append(reason)
            np.putmask(code, (code == 0) & mask, len(reasons))

        for plugin in self.filter_plugins:
            plugin.vector_filter(batch, order, reject)
        batch.reasons = reasons
        return code

    def _scores(self, batch: Batch, rows: np.ndarray) -> np.ndarray:
        """Scores of the nodes ``rows`` (one row of nodes per pod), as the plugins give them."""
        shape = rows.shape
        total, weights = np.zeros(shape), np.zeros(shape)
        for plugin, weight in self.score_plugins:
            found = plugin.vector_score(batch, rows)
            if found is None:
                continue
            value, has = found
            total += weight * np.where(has, value, 0)
            weights += weight * has
        out: np.ndarray = np.where(weights > 0, np.rint(np.divide(
            total, weights, out=np.zeros(shape), where=weights > 0)), 0)
        return out
