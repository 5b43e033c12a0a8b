"""Static providers: values written in the provider's spec."""

from __future__ import annotations

import math
from collections.abc import Sequence

from shoal.model.core import StaticSpec
from shoal.scheduler.metrics.providers.base import MetricError, no_sample


class StaticClient:
    """Values written in the provider's spec."""

    def __init__(self, spec: StaticSpec) -> None:
        self.values = dict(spec.metrics)
        self.requests = 0

    async def fetch(self, metrics: Sequence[str]) -> dict[str, float | MetricError]:
        self.requests += 1
        out: dict[str, float | MetricError] = {}
        for name in metrics:
            value = self.values.get(name)
            out[name] = no_sample(name) if value is None or math.isnan(value) else value
        return out

    async def close(self) -> None:
        return None
