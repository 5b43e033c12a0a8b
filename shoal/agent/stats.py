"""The agent's own timings: a count, a sum and a maximum per operation, nothing more.

Cheap enough for every request; ``/healthz`` shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Timing:
    count: int = 0
    total: float = 0.0
    longest: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        self.longest = max(self.longest, seconds)

    def body(self) -> dict[str, float]:
        mean = self.total / self.count if self.count else 0.0
        return {"count": self.count, "meanMs": round(mean * 1000, 3),
                "maxMs": round(self.longest * 1000, 3)}


@dataclass
class Timings:
    sample: Timing = field(default_factory=Timing)
    commit: Timing = field(default_factory=Timing)

    def body(self) -> dict[str, dict[str, float]]:
        return {"sample": self.sample.body(), "commit": self.commit.body()}
