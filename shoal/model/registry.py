"""Every stored kind, looked up by API group and plural or by kind name.

Beside the model class, each kind has the data that describes it to people:
short names and table columns, kept without the models in
``shoal.model.catalog`` (so a command that only prints starts fast), which is also
where each model reads its plural and scope (``Kind.__pydantic_init_subclass__``). A column
names a dotted JSON path and, where a raw value would read badly, a formatter
by name; the formatters themselves belong to whoever prints (the CLI), so this
layer stays free of any front end.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.model import catalog
from shoal.model.base import Kind
from shoal.model.catalog import Column
from shoal.model.coordination import Lease
from shoal.model.copies import Copy
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    Role,
    RoleBinding,
)
from shoal.model.events import Event
from shoal.model.infrastructure import (
    Cloud,
    GlobalCloud,
    GlobalInfrastructureProvider,
    InfrastructureProvider,
)
from shoal.model.kubernetes import Application, Cluster
from shoal.model.pods import Pod
from shoal.model.scheduling import RescheduleTask, SchedulerConfiguration


@dataclass(frozen=True)
class Resource:
    """What describes a kind beyond its model: the names people type and its table."""

    kind: type[Kind]
    short_names: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()


_MODELS: tuple[type[Kind], ...] = (
    GlobalMetric,
    Metric,
    GlobalMetricsProvider,
    MetricsProvider,
    Role,
    RoleBinding,
    Application,
    Cluster,
    Copy,
    GlobalCloud,
    Cloud,
    GlobalInfrastructureProvider,
    InfrastructureProvider,
    Lease,
    Event,
    RescheduleTask,
    SchedulerConfiguration,
    Pod,
)


def _resource(kind: type[Kind]) -> Resource:
    entry = catalog.entry_of(kind.api_name(), kind.kind_name())
    return Resource(kind, entry.short_names, entry.columns)


RESOURCES: dict[type[Kind], Resource] = {kind: _resource(kind) for kind in _MODELS}
"""Short names and table columns come from ``shoal.model.catalog``, the model-free list."""

KINDS: tuple[type[Kind], ...] = tuple(RESOURCES)


def register(kind: type[Kind], resource: Resource | None = None) -> type[Kind]:
    """Add a kind defined outside this module (later API groups) to the registry."""
    global KINDS
    RESOURCES[kind] = resource or RESOURCES.get(kind) or Resource(kind)
    if kind not in KINDS:
        KINDS = (*KINDS, kind)
        BY_PLURAL[(kind.api_name(), kind.plural)] = kind
        BY_KIND[(kind.api_name(), kind.kind_name())] = kind
    return kind


BY_PLURAL: dict[tuple[str, str], type[Kind]] = {(k.api_name(), k.plural): k for k in KINDS}
BY_KIND: dict[tuple[str, str], type[Kind]] = {(k.api_name(), k.kind_name()): k for k in KINDS}

BATCH_CREATES: dict[str, type[Kind]] = {
    catalog.entry_of(k.api_name(), k.kind_name()).collection_path(): k
    for k in KINDS
    if k.created_in_batches
}
"""The kinds created in batches (``Kind.created_in_batches``), by the path of their batch
create (the collection of every namespace): the API's endpoint serves these paths and its
guard authorises their items, from this one table."""


def kind_for(api: str, kind: str) -> type[Kind]:
    try:
        return BY_KIND[(api, kind)]
    except KeyError:
        raise KeyError(f"unknown kind {api}/{kind}") from None
