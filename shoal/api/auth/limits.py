"""Per-user request rate and watch count: one user's flood never starves the others."""

from __future__ import annotations

from shoal.api.auth.config import Limits


class PerUser:
    """Token buckets for the request rate and counters for open watches, by user."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._buckets: dict[str, tuple[float, float]] = {}
        self._watches: dict[str, int] = {}

    def take(self, who: str, now: float) -> bool:
        """One request of ``who`` at ``now``: False when over the rate."""
        rate, burst = self.limits.rate_per_user, float(self.limits.burst)
        tokens, last = self._buckets.get(who, (burst, now))
        tokens = min(burst, tokens + (now - last) * rate)
        if tokens < 1.0:
            self._buckets[who] = (tokens, now)
            return False
        if len(self._buckets) > 100_000:
            self._buckets.clear()
        self._buckets[who] = (tokens - 1.0, now)
        return True

    def open_watch(self, who: str) -> bool:
        count = self._watches.get(who, 0)
        if count >= self.limits.watches_per_user:
            return False
        self._watches[who] = count + 1
        return True

    def close_watch(self, who: str) -> None:
        left = self._watches.get(who, 1) - 1
        if left <= 0:
            self._watches.pop(who, None)
        else:
            self._watches[who] = left
