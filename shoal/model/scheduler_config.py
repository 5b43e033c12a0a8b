"""Scheduler configuration, loaded from YAML (``shoal scheduler --config FILE``).

Every field has a default; the defaults are documented in docs/scheduler.md.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shoal.machinery import backoff, config


class Backoff(BaseModel):
    """Delay between two attempts to place an application that fits nowhere."""

    model_config = ConfigDict(extra="forbid")
    initial: float = Field(
        default=1.0,
        gt=0,
        description="Seconds before the first retry (an application's spec.retry_delay "
        "overrides it)",
    )
    factor: float = Field(default=2.0, ge=1, description="Growth of the delay per retry")
    cap: float = Field(default=60.0, gt=0, description="Longest delay")

    def delay(self, attempt: int) -> float:
        """Delay before attempt ``attempt + 1`` (``attempt`` ≥ 1 failed so far)."""
        return backoff.Backoff(self.initial, self.cap, self.factor).delay(attempt)


class Plugins(BaseModel):
    """Plugins enabled per phase, by registered name, in the order they run."""

    model_config = ConfigDict(extra="forbid")
    candidates: list[str] = Field(default_factory=lambda: ["namespace", "schedulable-state"])
    filters: list[str] = Field(
        default_factory=lambda: [
            "cordon",
            "usable-metrics",
            "label-constraints",
            "custom-resources",
            "metric-constraints",
            "node-fit",
        ]
    )
    prefer: list[str] = Field(default_factory=lambda: ["prefer-metrics"])
    scores: list[str] = Field(default_factory=lambda: ["metrics", "stickiness"])


class FleetConfig(BaseModel):
    """The fleet pipeline (pods onto nodes through cluster agents); docs/fleet.md."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(default=True, description="Idle while no agent is registered")
    clusters_percent: float = Field(default=33.0, gt=0, le=100, description="Cp: clusters asked")
    nodes_bp: int = Field(default=200, ge=1, le=10_000, description="Np: basis points of nodes")
    min_clusters: int = Field(default=2, ge=1, description="Clusters asked at least")
    deadline: float = Field(default=0.2, gt=0, description="Seconds an agent has to answer")
    min_answers: float = Field(default=0.5, ge=0, le=1, description="Share of agents needed")
    candidates: int = Field(default=3, ge=1, description="k: MultiBind candidates")
    keep: int = Field(default=6, ge=0, description="Best nodes each agent answers (0: all Np)")
    attempts: int = Field(default=10, ge=1, description="Attempts before Failed")
    backoff: Backoff = Field(default_factory=lambda: Backoff(initial=0.05, factor=2, cap=5))
    samplers: int = Field(default=8, ge=1, description="Sampling pipelines in flight")
    batch: int = Field(default=64, ge=1, le=1000, description="Pods per sampling request")
    linger: float = Field(default=0.03, ge=0, le=1,
                          description="Seconds a sampler waits for a fuller batch")
    commit_timeout: float = Field(default=5.0, gt=0, description="Seconds a commit may take")
    commits: int = Field(default=512, ge=1, description="Commits in flight")
    status_writers: int = Field(default=4, ge=1, description="Status batches in flight")
    sweep_interval: float = Field(
        default=60.0, gt=0,
        description="Seconds between checks of the member pods against the fleet pods: "
        "member pods of deleted fleet pods are deleted, Scheduled pods whose member pod is "
        "gone are placed again")
    strategy: str = Field(default="random", description="Agents' sampling strategy")
    shard: int = Field(default=0, ge=0, description="This scheduler's share of the pods")
    shards: int = Field(default=1, ge=1, description="Schedulers sharing the pods")
    sort: str = "priority"
    filters: list[str] = Field(default_factory=lambda: ["fits-sampled"])
    scores: dict[str, float] = Field(default_factory=lambda: {"agent-score": 1.0})


class SchedulerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stickiness: float = Field(default=0.1, ge=0, description="Weight of the stickiness term")
    reschedule_after: float = Field(
        default=60.0, gt=0, description="Seconds between two evaluations of a placed application"
    )
    retries: int = Field(
        default=-1,
        ge=-1,
        description="Failed placement attempts before FAILED; -1 (default, as Krake): never. "
        "An application's spec.retry_limit overrides it",
    )
    backoff: Backoff = Field(default_factory=Backoff)
    min_migration_interval: float = Field(
        default=60.0,
        ge=0,
        description="Seconds an application stays where it settled (placed, or moved) before "
        "it moves again for a better cluster; 60, as Krake's reschedule_after. 0: no pacing",
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
    events: bool = Field(default=True, description="Record events (docs/observability.md)")
    plugins: Plugins = Field(default_factory=Plugins)
    fleet: FleetConfig = Field(default_factory=FleetConfig)

    @classmethod
    def load(cls, path: str | Path | None) -> SchedulerConfig:
        return config.load(cls, path, section="scheduler")
