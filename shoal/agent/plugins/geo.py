"""Geo-location (Vela's plugin): nodes within a great-circle distance of the pod's target.

The pod's label ``shoal.dev/target-lat-long`` (``"48.21_16.37"``: label values
allow no comma) names the target, ``shoal.dev/max-distance-km`` the largest
distance (default ``geo_max_distance_km``, 10 km); a node gives its location in
``shoal.dev/lat-long``. Nodes farther away, or without a location, are
filtered out; the others score ``ceil(100 − 99·distance/max)``: 100 on the
spot, 1 at the edge. A pod without a target is not this plugin's business.
"""

from __future__ import annotations

import math

import numpy as np

from shoal.agent.cache import NodeInfo
from shoal.agent.framework import FilterPlugin, InvalidPod, Reject, ScorePlugin, register
from shoal.agent.places import LOCATION, MAX_DISTANCE, TARGET, distance_km, lat_long
from shoal.agent.pod import PodRequest
from shoal.agent.table import FARTHER, Batch

__all__ = ["LOCATION", "MAX_DISTANCE", "TARGET", "GeoLocation", "geo_score", "lat_long"]

def geo_score(distance: float, limit: float) -> int:
    return math.ceil(100 - 99 * distance / limit)


@register("filters", "scores")
class GeoLocation(FilterPlugin, ScorePlugin):
    name = "geo-location"

    def check(self, pod: PodRequest) -> None:
        text = pod.labels.get(TARGET)
        if text is not None and lat_long(text) is None:
            raise InvalidPod(f"pod.metadata.labels.{TARGET}",
                             f"{text!r} is not LAT_LONG in degrees")
        if MAX_DISTANCE in pod.labels and self._limit(pod) is None:
            raise InvalidPod(f"pod.metadata.labels.{MAX_DISTANCE}",
                             f"{pod.labels[MAX_DISTANCE]!r} is not a positive number of km")

    def _limit(self, pod: PodRequest) -> float | None:
        text = pod.labels.get(MAX_DISTANCE)
        if text is None:
            return self.config.geo_max_distance_km
        try:
            value = float(text)
        except ValueError:
            return None
        return value if value > 0 and math.isfinite(value) else None

    def _distance(self, pod: PodRequest, node: NodeInfo) -> tuple[float, float] | str | None:
        """(distance, limit), a rejection reason, or None without a target."""
        text = pod.labels.get(TARGET)
        target = lat_long(text) if text is not None else None
        limit = self._limit(pod)
        if target is None or limit is None:
            return None
        here = lat_long(node.labels.get(LOCATION, ""))
        if here is None:
            return "no node location"
        distance = distance_km(target, here)
        return f"farther than {limit:g} km" if distance > limit else (distance, limit)

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        found = self._distance(pod, node)
        return found if isinstance(found, str) else None

    def score(self, pod: PodRequest, node: NodeInfo) -> float | None:
        found = self._distance(pod, node)
        return geo_score(*found) if isinstance(found, tuple) else None

    def vector_filter(self, batch: Batch, order: np.ndarray, reject: Reject) -> None:
        if not batch.geo.any():  # only pods with a target are this plugin's business
            return
        distance = np.full(order.shape, np.inf)
        distance[batch.geo] = batch.distance(order[batch.geo], batch.target[batch.geo])
        near = batch.geo[:, None]
        reject(near & np.isnan(distance), "no node location")
        reject(near & (distance > batch.target[:, 2, None]), FARTHER)

    def vector_score(self, batch: Batch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        geo = batch.geo
        if not geo.any():
            return None
        value = np.zeros(rows.shape)
        distance = batch.distance(rows[geo], batch.target[geo])
        value[geo] = np.ceil(100 - 99 * distance / batch.target[geo, 2, None])
        return value, np.broadcast_to(geo[:, None], rows.shape)
