"""Group ``core``: metrics, metrics providers, roles and role bindings."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from shoal.model.base import Kind, Model, Reason, null_as
from shoal.model.shape import addition, section


class MetricProviderRef(Model):
    name: str = Field(min_length=1, description="Name of the (Global)MetricsProvider.")
    metric: str = Field(min_length=1, description="Name of the metric inside the provider.")


class MetricSpec(Model):
    allowed_values: list[float] = addition(default_factory=list)
    min: float
    max: float
    provider: MetricProviderRef

    @model_validator(mode="after")
    def _min_below_max(self) -> MetricSpec:
        if not self.min < self.max:
            raise ValueError(f"min ({self.min}) must be less than max ({self.max})")
        return self

    def normalise(self, value: float) -> float:
        return (value - self.min) / (self.max - self.min)

    def check(self, value: float) -> str | None:
        """Why ``value`` is not a valid value of this metric, or None when it is."""
        if not self.min <= value <= self.max:
            return f"value {value} outside [{self.min}, {self.max}]"
        if self.allowed_values and value not in self.allowed_values:
            return f"value {value} not in allowed values {self.allowed_values}"
        return None


class CoreKind(Kind):
    api: Literal["core"] = "core"


class _MetricKind(CoreKind):
    """A metric: the same spec, cluster-wide or in a namespace."""

    spec: MetricSpec


class GlobalMetric(_MetricKind):
    kind: Literal["GlobalMetric"] = "GlobalMetric"


class Metric(_MetricKind):
    kind: Literal["Metric"] = "Metric"


def _provider_url(url: str) -> str:
    """Krake takes any string as a Prometheus or Kafka provider's URL: one Shoal cannot
    reach (``1.2.3.4:9090``, no scheme) makes the provider's metrics
    ``UNREACHABLE_METRICS_PROVIDER`` when they are read. A scheme other than HTTP's is
    refused here, as it can never be reached."""
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if scheme is not None and scheme.group(1).lower() not in ("http", "https"):
        raise ValueError(f"the scheme {scheme.group(1)!r} is not http or https")
    return url


ProviderUrl = Annotated[str, Field(min_length=1), AfterValidator(_provider_url)]


class PrometheusSpec(Model):
    url: ProviderUrl


class InfluxSpec(Model):
    """InfluxDB 2 (Flux: ``org``, ``bucket``, ``token``) or 1.x (InfluxQL: ``database``)."""

    url: str = Field(min_length=1, pattern=r"^https?://")
    version: Literal[1, 2] = 2
    token: str | None = None
    org: str | None = None
    bucket: str | None = None
    database: str | None = None
    username: str | None = None
    password: str | None = None

    @model_validator(mode="after")
    def _fields_of_version(self) -> InfluxSpec:
        if self.version == 2:
            missing = [f for f in ("token", "org", "bucket") if not getattr(self, f)]
            if missing:
                raise ValueError(f"InfluxDB 2 needs {', '.join(missing)}")
        elif not self.database:
            raise ValueError("InfluxDB 1.x needs database")
        return self


class KafkaSpec(Model):
    url: ProviderUrl
    table: str = Field(min_length=1)
    comparison_column: str = Field(min_length=1)
    value_column: str = Field(min_length=1)


class StaticSpec(Model):
    metrics: dict[str, float] = Field(default_factory=dict)


ProviderType = Literal["prometheus", "influx", "kafka", "static"]


class MetricsProviderSpec(Model):
    type: ProviderType
    prometheus: PrometheusSpec | None = section()
    influx: InfluxSpec | None = section()
    kafka: KafkaSpec | None = section()
    static: StaticSpec | None = section()

    @model_validator(mode="after")
    def _one_matching_section(self) -> MetricsProviderSpec:
        if getattr(self, self.type) is None:
            raise ValueError(f"type is {self.type!r} but the {self.type!r} section is missing")
        others = [t for t in ("prometheus", "influx", "kafka", "static") if t != self.type]
        extra = [t for t in others if getattr(self, t) is not None]
        if extra:
            raise ValueError(f"type is {self.type!r} but sections {extra} are also set")
        return self


class MetricsProviderStatus(Model):
    """Health of the provider as the scheduler's metric cache last saw it (Shoal addition)."""

    reason: Reason | None = None
    last_fetch: str | None = None
    fetch_latency_seconds: float | None = None
    errors: int = 0


class _MetricsProviderKind(CoreKind):
    """A metrics provider: the same spec and status, cluster-wide or in a namespace."""

    spec: MetricsProviderSpec
    status: Annotated[MetricsProviderStatus, null_as(MetricsProviderStatus)] = addition(
        default_factory=MetricsProviderStatus
    )

    subresources = ("status",)


class GlobalMetricsProvider(_MetricsProviderKind):
    kind: Literal["GlobalMetricsProvider"] = "GlobalMetricsProvider"


class MetricsProvider(_MetricsProviderKind):
    kind: Literal["MetricsProvider"] = "MetricsProvider"


# Krake's verbs; Shoal adds ``watch``, ``secrets`` (read secret fields in clear) and
# ``impersonate`` (on ``users``: act for another user); "*" is any ("" too, as Krake had it:
# roles stored so still load, new ones are asked for "*", see shoal.model.validation.roles).
Verb = Literal[
    "create", "list", "list_all", "get", "update", "delete", "watch", "secrets", "impersonate",
    "*", "",
]  # fmt: skip


class RoleRule(Model):
    api: str = ""
    resources: list[str] = Field(default_factory=list)
    namespaces: list[str] = Field(default_factory=list)
    verbs: list[Verb] = Field(default_factory=list)
    # Which users or groups an ``impersonate`` rule lets its holder act as (Kubernetes'
    # resourceNames); empty: any. Only such rules may name objects (validation.roles).
    names: list[str] = addition(default_factory=list)


class Role(CoreKind):
    kind: Literal["Role"] = "Role"
    rules: list[RoleRule] = Field(default_factory=list)


class RoleBinding(CoreKind):
    kind: Literal["RoleBinding"] = "RoleBinding"
    users: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
