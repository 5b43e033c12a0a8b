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
from functools import lru_cache

from shoal.agent.cache import NodeInfo
from shoal.agent.framework import FilterPlugin, InvalidPod, ScorePlugin, register
from shoal.agent.pod import PodRequest

TARGET = "shoal.dev/target-lat-long"
MAX_DISTANCE = "shoal.dev/max-distance-km"
LOCATION = "shoal.dev/lat-long"
EARTH_RADIUS_KM = 6371.0


@lru_cache(maxsize=65536)
def lat_long(text: str) -> tuple[float, float] | None:
    """``"48.21_16.37"`` (or with a comma) as radians; None when unreadable or out of range."""
    parts = text.replace(",", "_").split("_")
    try:
        lat, lon = (float(p) for p in parts)
    except ValueError:
        return None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        return None
    return math.radians(lat), math.radians(lon)


def distance_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance (haversine) between two points in radians."""
    h = (math.sin((b[0] - a[0]) / 2) ** 2
         + math.cos(a[0]) * math.cos(b[0]) * math.sin((b[1] - a[1]) / 2) ** 2)
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


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
