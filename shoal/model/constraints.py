"""What an application or a cluster asks of where it runs: label, metric and custom
resource constraints, checked where they enter the model.

Shared by the ``kubernetes`` group (applications on clusters, clusters on clouds) and the
``infrastructure`` group (metric references of clouds).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, Field, ValidationInfo

from shoal.machinery.names import CRD_NAME
from shoal.machinery.selectors import ConstraintError, LabelConstraint, MetricConstraint
from shoal.model.base import Model, null_as, trusted


def _parsed(language: type[LabelConstraint | MetricConstraint]) -> Any:
    """Validator: a constraint that parses, kept as the user wrote it (``location=DE`` reads
    back as ``location=DE``, as in Krake). Its readers parse it again, from a cache
    (``shoal.machinery.selectors``); trusted objects are not parsed here."""

    def parses(text: str, info: ValidationInfo) -> str:
        if trusted(info):
            return text
        try:
            language.parse(text)
        except ConstraintError as error:
            raise ValueError(str(error)) from None
        return text

    return AfterValidator(parses)


LabelConstraintText = Annotated[
    str,
    _parsed(LabelConstraint),
    Field(examples=["location is DE"], description="Label constraint, e.g. 'location in (DE, FR)'"),
]
MetricConstraintText = Annotated[
    str,
    _parsed(MetricConstraint),
    Field(examples=["load < 0.5"], description="Metric constraint, e.g. 'load >= 0.5'"),
]
T = TypeVar("T")
ConstraintList = Annotated[list[T], null_as(list)]
"""Krake's constraint lists default to null; Shoal reads null as no constraint."""
CustomResourceName = Annotated[
    str, Field(pattern=CRD_NAME, max_length=253, description="'<plural>.<group>' of a CRD")
]


class MetricRef(Model):
    name: str = Field(min_length=1, max_length=253)
    weight: float = Field(ge=0)
    namespaced: bool = False


class ClusterConstraints(Model):
    labels: ConstraintList[LabelConstraintText] = Field(default_factory=list)
    metrics: ConstraintList[MetricConstraintText] = Field(default_factory=list)
    custom_resources: list[CustomResourceName] = Field(default_factory=list)


class Constraints(Model):
    migration: bool = True
    cluster: ClusterConstraints = Field(default_factory=ClusterConstraints)


class CloudConstraints(Model):
    labels: ConstraintList[LabelConstraintText] = Field(default_factory=list)
    metrics: ConstraintList[MetricConstraintText] = Field(default_factory=list)


class ClusterConstraintsOnCloud(Model):
    cloud: CloudConstraints = Field(default_factory=CloudConstraints)
