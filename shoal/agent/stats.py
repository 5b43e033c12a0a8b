"""The agent's own figures: timings per operation (``/healthz``) and ``/metrics``.

Timings are a count, a sum and a maximum per operation, cheap enough for every request.
``/metrics`` (Prometheus text) says whether the numpy path samples pods, and which enabled
plugin keeps it off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge, generate_latest


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


def metrics(vectorised: bool, plugins: dict[str, list[str]], without: list[tuple[str, str]],
            timings: Timings) -> bytes:
    """The agent's ``/metrics`` page (each agent its own registry: several share a process in
    tests and ``shoal up --single-process``)."""
    registry = CollectorRegistry()
    Gauge("shoal_agent_vectorised", "1 when large clusters' samples run on numpy; 0 when an "
          "enabled plugin has no vectorised form", registry=registry).set(int(vectorised))
    form = Gauge("shoal_agent_plugin_vectorised", "Whether each enabled plugin has a "
                 "vectorised form", ["phase", "plugin"], registry=registry)
    missing = set(without)
    for phase, names in plugins.items():
        for name in names:
            form.labels(phase, name).set(0 if (phase, name) in missing else 1)
    operations = Gauge("shoal_agent_operations", "Samples and commits answered",
                       ["operation"], registry=registry)
    for operation, timing in (("sample", timings.sample), ("commit", timings.commit)):
        operations.labels(operation).set(timing.count)
    return generate_latest(registry)
