"""Group ``infrastructure``: clouds that clusters without a kubeconfig are placed on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shoal.model.base import Kind, Model, Reason
from shoal.model.kubernetes import MetricRef


class PasswordUser(Model):
    username: str
    password: str
    domain_name: str = "Default"
    comment: str | None = Field(default=None, description="Free text for people.")


class PasswordProject(Model):
    name: str
    domain_id: str = "default"
    comment: str | None = Field(default=None, description="Free text for people.")


class PasswordAuth(Model):
    version: Literal["3"] = "3"
    user: PasswordUser
    project: PasswordProject


class OpenstackAuth(Model):
    type: Literal["password"] = "password"
    password: PasswordAuth


class OpenstackSpec(Model):
    url: str = Field(min_length=1, pattern=r"^https?://")
    auth: OpenstackAuth
    metrics: list[MetricRef] = Field(default_factory=list)
    infrastructure_provider: InfrastructureProviderRef | None = None


class InfrastructureProviderRef(Model):
    name: str
    namespaced: bool = False


class CloudSpec(Model):
    type: Literal["openstack"] = "openstack"
    openstack: OpenstackSpec

    @property
    def metrics(self) -> list[MetricRef]:
        return self.openstack.metrics


class CloudStatus(Model):
    state: Literal["ONLINE", "FAILING_METRICS"] = "ONLINE"
    reason: Reason | None = None
    metrics_reasons: dict[str, Reason] = Field(default_factory=dict)


class _CloudKind(Kind):
    """A cloud: the same spec and status, cluster-wide or in a namespace."""

    api: Literal["infrastructure"] = "infrastructure"
    spec: CloudSpec
    status: CloudStatus = Field(default_factory=CloudStatus)

    subresources = ("status",)


class GlobalCloud(_CloudKind):
    kind: Literal["GlobalCloud"] = "GlobalCloud"
    plural, namespaced = "globalclouds", False


class Cloud(_CloudKind):
    kind: Literal["Cloud"] = "Cloud"
    plural, namespaced = "clouds", True


OpenstackSpec.model_rebuild()
