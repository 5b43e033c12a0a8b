"""What an application asks of a placement on several clusters (``spec.placement``): how
many clusters, spread by which label, its replicas divided or duplicated, their weights,
fallback groups and per-cluster overrides; checked where it enters the model.

How a placement is computed from it is ``placement``'s and the scheduler's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from shoal.model.base import LabelKey, Model
from shoal.model.constraints import LabelConstraintText


class ClusterWeight(Model):
    """A static weight: the clusters a label constraint selects get ``weight`` parts."""

    clusters: LabelConstraintText
    weight: int = Field(ge=0, le=10_000)


class ObjectPatch(Model):
    """A merge patch for one manifest object, named by kind and name: a JSON merge patch,
    except that lists of named items (containers…) merge item by item, as kubectl's
    strategic merge does (``shoal.machinery.patch.strategic_merge``)."""

    kind: str = Field(min_length=1, max_length=63)
    name: str = Field(min_length=1, max_length=253)
    merge: dict[str, Any]

    @field_validator("merge")
    @classmethod
    def _same_object(cls, merge: dict[str, Any]) -> dict[str, Any]:
        """An override changes an object, never which object it is."""
        metadata = merge.get("metadata")
        named = isinstance(metadata, dict) and ({"name", "namespace"} & set(metadata))
        if {"apiVersion", "kind"} & set(merge) or named:
            raise ValueError("may not change apiVersion, kind, metadata.name or namespace")
        return merge


class Override(Model):
    """What differs on the clusters a label constraint selects."""

    clusters: LabelConstraintText
    patch: ObjectPatch


ReplicaMode = Literal["divided", "duplicated"]
WeightMode = Literal["even", "dynamic"]


class Placement(Model):
    """How many clusters run an application, and how its replicas are shared among them."""

    clusters: int = Field(default=1, ge=1, le=100, description="How many clusters run it.")
    spread_by: LabelKey | None = Field(
        default=None,
        description="A cluster label: the chosen clusters carry distinct values of it.",
    )
    replicas: ReplicaMode = Field(
        default="duplicated",
        description="divided: the replicas are shared among the clusters; duplicated: each "
        "cluster runs them all.",
    )
    weights: WeightMode | list[ClusterWeight] = Field(
        default="even",
        description="How divided replicas are shared: even, dynamic (by free capacity), or a "
        "list of {clusters, weight}.",
    )
    fallback: list[LabelConstraintText] = Field(
        default_factory=list,
        max_length=10,
        description="Ordered cluster groups; a group is used only while those before it "
        "cannot hold the application.",
    )
    overrides: list[Override] = Field(default_factory=list, max_length=50)

    @field_validator("weights")
    @classmethod
    def _some_weight(cls, weights: WeightMode | list[ClusterWeight]) -> Any:
        if isinstance(weights, list) and not any(rule.weight > 0 for rule in weights):
            raise ValueError("a static list needs at least one weight above 0")
        return weights

    @model_validator(mode="after")
    def _weights_divide(self) -> Placement:
        if self.replicas == "duplicated" and self.weights != "even":
            raise ValueError("weights share divided replicas: set replicas: divided")
        return self
