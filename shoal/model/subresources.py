"""The bodies of the ``kubernetes`` group's subresource requests: the scheduler's
bindings (one, or a batch), a cluster's binding to a cloud, and the tokens of Krake's
complete and shutdown hooks.

Requests, not kinds: nothing here is stored as it is sent.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt

from shoal.machinery.names import MAX_OBJECT_NAME
from shoal.model.base import Model, ResourceRef


class Share(Model):
    """One cluster of a binding and its share of the replicas."""

    cluster: ResourceRef
    replicas: StrictInt | None = Field(default=None, ge=0)


class ApplicationBinding(Model):
    """Body of ``PUT .../applications/{name}/binding`` (Krake's ``ClusterBinding``)."""

    api: Literal["kubernetes"] = "kubernetes"
    kind: Literal["ClusterBinding"] = "ClusterBinding"
    cluster: ResourceRef
    resource_version: int | None = Field(
        default=None, description="Bind only if the application is still at this revision."
    )
    triggered: bool = Field(
        default=True,
        description="Set kube_controller_triggered (the scheduler saw the latest spec).",
    )
    placements: list[Share] | None = Field(
        default=None,
        description="Every cluster and its share, for an application with spec.placement; "
        "``cluster`` is then the first of them.",
    )
    explanation: dict[str, Any] | None = Field(
        default=None, description="Scheduling explanation stored in status.scheduling."
    )


class BindingItem(ApplicationBinding):
    """One binding of a batch: which application, and the binding itself.

    Strict where lax parsing would accept what the schema forbids (``0`` for
    ``false``, ``"1"`` for a revision): the batch answers 200 with per-item
    results, so a coerced body would pass unnoticed.
    """

    namespace: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    name: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    resource_version: StrictInt | None = Field(
        default=None, description="Bind only if the application is still at this revision."
    )
    triggered: StrictBool = Field(
        default=True,
        description="Set kube_controller_triggered (the scheduler saw the latest spec).",
    )


class BindingBatch(Model):
    """Body of ``POST /scheduling/bindings`` (Shoal addition): many bindings, one request."""

    bindings: list[BindingItem] = Field(max_length=1000)


class ClusterBinding(Model):
    """Body of ``PUT .../clusters/{name}/binding`` (Krake's ``CloudBinding``)."""

    api: Literal["infrastructure"] = "infrastructure"
    kind: Literal["CloudBinding"] = "CloudBinding"
    cloud: ResourceRef
    resource_version: int | None = None


class _Token(Model):
    api: Literal["kubernetes"] = "kubernetes"
    kind: str
    token: str | None = None


class CompleteToken(_Token):
    """Body of ``PUT .../applications/{name}/complete`` (Krake's ``ApplicationComplete``)."""

    kind: Literal["Complete"] = "Complete"


class ShutdownToken(_Token):
    """Body of ``PUT .../applications/{name}/shutdown`` (Krake's ``ApplicationShutdown``)."""

    kind: Literal["Shutdown"] = "Shutdown"
