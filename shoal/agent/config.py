"""Agent configuration: which plugins run, the default Np, and every timeout.

Read from YAML (``shoal agent --config FILE``, the ``agent:`` key or the whole
file); every field has a default, documented in docs/agent.md.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shoal.machinery import config


class AgentPlugins(BaseModel):
    """Plugins enabled per phase, by registered name; filters run in this order."""

    model_config = ConfigDict(extra="forbid")
    sampling: list[str] = Field(default_factory=lambda: ["random", "round-robin"])
    filters: list[str] = Field(
        default_factory=lambda: [
            "node-ready", "node-selector", "taint-toleration", "resources-fit", "geo-location"
        ]
    )
    scores: dict[str, float] = Field(
        default_factory=lambda: {"least-allocated": 1.0, "geo-location": 1.0},
        description="Score plugin → weight in the weighted average (0–100)",
    )


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cluster: str = Field(default="", description="Cluster name shown in answers")
    namespace: str = Field(default="default", description="Namespace of pods that name none")
    nodes_to_sample_bp: int = Field(
        default=200, ge=1, le=10_000, description="Np: basis points of the nodes per sample"
    )
    sample_timeout: float = Field(default=0.1, gt=0, description="Deadline of one sample (s)")
    commit_timeout: float = Field(default=5.0, gt=0, description="Create in the cluster (s)")
    lock_timeout: float = Field(default=2.0, gt=0, description="Wait for a node's lock (s)")
    geo_max_distance_km: float = Field(
        default=10.0, gt=0, description="Distance a pod accepts when its label names none"
    )
    plugins: AgentPlugins = Field(default_factory=AgentPlugins)

    @classmethod
    def from_file(cls, path: str | Path | None, **overrides: object) -> AgentConfig:
        given = {k: v for k, v in overrides.items() if v}
        return config.load(cls, path, section="agent", overrides=given)
