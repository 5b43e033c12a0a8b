"""Scheduler configuration, loaded from YAML (``shoal scheduler --config FILE``).

Every field has a default; the defaults are documented in docs/scheduler.md.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field


class Backoff(BaseModel):
    """Delay between two attempts to place an application that fits nowhere."""

    model_config = ConfigDict(extra="forbid")
    initial: float = Field(default=1.0, gt=0, description="Seconds before the first retry")
    factor: float = Field(default=2.0, ge=1, description="Growth of the delay per retry")
    cap: float = Field(default=60.0, gt=0, description="Longest delay")

    def delay(self, attempt: int) -> float:
        """Delay before attempt ``attempt + 1`` (``attempt`` ≥ 1 failed so far)."""
        return float(min(self.cap, self.initial * self.factor ** max(attempt - 1, 0)))


class Plugins(BaseModel):
    """Plugins enabled per phase, by registered name, in the order they run."""

    model_config = ConfigDict(extra="forbid")
    candidates: list[str] = Field(default_factory=lambda: ["namespace", "schedulable-state"])
    filters: list[str] = Field(
        default_factory=lambda: ["label-constraints", "custom-resources", "metric-constraints"]
    )
    prefer: list[str] = Field(default_factory=lambda: ["prefer-metrics"])
    scores: list[str] = Field(default_factory=lambda: ["metrics", "stickiness"])


class SchedulerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stickiness: float = Field(default=0.1, ge=0, description="Weight of the stickiness term")
    reschedule_after: float = Field(
        default=60.0, gt=0, description="Seconds between two evaluations of a placed application"
    )
    retries: int = Field(default=5, ge=1, description="Failed attempts before FAILED")
    backoff: Backoff = Field(default_factory=Backoff)
    min_migration_interval: float = Field(
        default=0.0, ge=0, description="Seconds an application stays after a migration"
    )
    workers: int = Field(
        default=256, ge=1, description="Scheduling passes (and bindings) in flight at once"
    )
    metrics_refresh: float = Field(default=10.0, gt=0, description="Metric cache refresh (s)")
    metrics_timeout: float = Field(default=5.0, gt=0, description="Timeout of one provider call")
    explain_names: int = Field(
        default=20, ge=0, description="Cluster names kept per rejection reason in status"
    )
    explain_ranking: int = Field(
        default=5, ge=1, description="Best clusters kept with their score terms in status"
    )
    plugins: Plugins = Field(default_factory=Plugins)

    @classmethod
    def load(cls, path: str | Path | None) -> SchedulerConfig:
        if path is None:
            return cls()
        data = yaml.safe_load(Path(path).read_text()) or {}
        return cls.model_validate(data.get("scheduler", data))
