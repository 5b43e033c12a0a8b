"""Where pods aim and nodes are: the labels that say it and the great-circle distance.

Read by the geo-location plugin node by node, and by the node table as arrays.
"""

from __future__ import annotations

import math
from functools import lru_cache

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
