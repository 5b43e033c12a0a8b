"""Group ``infrastructure``: clouds that clusters without a kubeconfig are placed on.

Infrastructure providers are the services (Krake's "IM", the Infrastructure
Manager) that create clusters on a cloud; a cloud names its provider.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from shoal.model.base import Kind, Model, Reason, null_as
from shoal.model.constraints import MetricRef
from shoal.model.shape import addition, section


class ImCloud(Model):
    """One more line of IM's auth data, for a cloud Shoal has no section for (IM's terms)."""

    id: str = Field(min_length=1, pattern=r"^[^;=\n\\]+$")
    type: str = Field(min_length=1, pattern=r"^[^;=\n\\]+$", description="Dummy, OpenNebula …")
    host: str | None = Field(default=None, pattern=r"^[^;\n\\]*$")
    username: str | None = Field(default=None, pattern=r"^[^;\n\\]*$")
    password: str | None = Field(default=None, pattern=r"^[^;\n\\]*$")
    token: str | None = Field(default=None, pattern=r"^[^;\n\\]*$")


class ImSpec(Model):
    """Where an Infrastructure Manager answers and how to log in: a token, or user and password."""

    url: str = Field(min_length=1, pattern=r"^https?://")
    username: str | None = None
    password: str | None = None
    token: str | None = None
    clouds: list[ImCloud] = addition(
        default_factory=list,
        description="Shoal addition: more clouds IM may build on, sent after the bound cloud's "
        "login (for example {id: test, type: Dummy}).",
    )

    @model_validator(mode="after")
    def _one_login(self) -> ImSpec:
        if self.token is None and (self.username is None or self.password is None):
            raise ValueError("an IM provider needs a token, or a username and a password")
        return self


class SimProviderSpec(Model):
    """Shoal addition: ``shoal sim`` builds the clusters (demos, tests, benchmarks)."""

    url: str = Field(min_length=1, pattern=r"^https?://", description="The simulator's URL.")
    token: str | None = Field(
        default=None,
        description="The token of the simulator's admin API (`shoal up` writes it in "
        "DATA_DIR/sim.token).",
    )


class InfrastructureProviderSpec(Model):
    """Who builds clusters: Krake's ``im`` (the Infrastructure Manager) or Shoal's ``sim``."""

    type: Literal["im", "sim"] = "im"
    im: ImSpec | None = section()
    sim: SimProviderSpec | None = section()

    @model_validator(mode="after")
    def _section_of_type(self) -> InfrastructureProviderSpec:
        if getattr(self, self.type) is None:
            raise ValueError(f"a provider of type {self.type} needs spec.{self.type}")
        return self


class _InfrastructureProviderKind(Kind):
    """An infrastructure provider: the same spec, cluster-wide or in a namespace."""

    api: Literal["infrastructure"] = "infrastructure"
    spec: InfrastructureProviderSpec


class GlobalInfrastructureProvider(_InfrastructureProviderKind):
    kind: Literal["GlobalInfrastructureProvider"] = "GlobalInfrastructureProvider"


class InfrastructureProvider(_InfrastructureProviderKind):
    kind: Literal["InfrastructureProvider"] = "InfrastructureProvider"


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
    """The provider that builds a cloud's clusters: a global one, or with ``namespaced`` one of
    the cloud's namespace. The cloud's password goes to this provider only."""

    name: str
    namespaced: bool = False
    uid: str | None = addition(
        None,
        description="Shoal addition, set by the API at each write: the uid of the provider "
        "the name resolved to. The cloud's password is sent to that provider only; one made "
        "later under the same name is not used.",
    )
    url: str | None = addition(
        None,
        description="Shoal addition, set by the API with uid: that provider's URL then. The "
        "password is not sent once the provider points elsewhere, until the cloud is "
        "written again.",
    )


class CloudSpec(Model):
    type: Literal["openstack"] = "openstack"
    openstack: OpenstackSpec

    @property
    def metrics(self) -> list[MetricRef]:
        return self.openstack.metrics


class CloudStatus(Model):
    state: Literal["ONLINE", "FAILING_METRICS"] = "ONLINE"
    reason: Reason | None = addition(None)
    metrics_reasons: dict[str, Reason] = Field(default_factory=dict)


class _CloudKind(Kind):
    """A cloud: the same spec and status, cluster-wide or in a namespace."""

    api: Literal["infrastructure"] = "infrastructure"
    spec: CloudSpec
    status: Annotated[CloudStatus, null_as(CloudStatus)] = Field(default_factory=CloudStatus)

    subresources = ("status",)


class GlobalCloud(_CloudKind):
    kind: Literal["GlobalCloud"] = "GlobalCloud"


class Cloud(_CloudKind):
    kind: Literal["Cloud"] = "Cloud"


OpenstackSpec.model_rebuild()
