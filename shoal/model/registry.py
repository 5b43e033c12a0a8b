"""Every stored kind, looked up by API group and plural or by kind name."""

from __future__ import annotations

from shoal.model.base import Kind
from shoal.model.coordination import Lease
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    Role,
    RoleBinding,
)
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import Application, Cluster
from shoal.model.scheduling import RescheduleTask

KINDS: tuple[type[Kind], ...] = (
    GlobalMetric,
    Metric,
    GlobalMetricsProvider,
    MetricsProvider,
    Role,
    RoleBinding,
    Application,
    Cluster,
    GlobalCloud,
    Cloud,
    Lease,
    RescheduleTask,
)


def register(kind: type[Kind]) -> type[Kind]:
    """Add a kind defined outside this module (later API groups) to the registry."""
    global KINDS
    if kind not in KINDS:
        KINDS = (*KINDS, kind)
        BY_PLURAL[(kind.api_name(), kind.plural)] = kind
        BY_KIND[(kind.api_name(), kind.kind_name())] = kind
    return kind


BY_PLURAL: dict[tuple[str, str], type[Kind]] = {(k.api_name(), k.plural): k for k in KINDS}
BY_KIND: dict[tuple[str, str], type[Kind]] = {(k.api_name(), k.kind_name()): k for k in KINDS}


def kind_for(api: str, kind: str) -> type[Kind]:
    try:
        return BY_KIND[(api, kind)]
    except KeyError:
        raise KeyError(f"unknown kind {api}/{kind}") from None
