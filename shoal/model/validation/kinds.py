"""Which rules each kind's body answers to."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from shoal.machinery.paths import join
from shoal.model import observer_schema, tosca
from shoal.model.base import Kind
from shoal.model.validation.findings import Finding
from shoal.model.validation.kubeconfig import check_kubeconfig
from shoal.model.validation.manifest import check_manifest
from shoal.model.validation.names import identifier
from shoal.model.validation.roles import check_binding, check_rules

Rule = Callable[[Any], Iterator[Finding]]


def check(obj: Kind) -> list[Finding]:
    """Every finding on ``obj`` as a create or update would send it; warnings included."""
    findings = list(_common(obj))
    rule = _RULES.get((obj.api, obj.kind))
    if rule is not None:
        findings.extend(rule(obj))
    return findings


async def check_templates(obj: Any) -> list[Finding]:
    """The findings of the templates ``obj`` carries, each parsed once, in a confined worker
    (``shoal.model.tosca``): never on the caller's event loop."""
    if (obj.api, obj.kind) != ("kubernetes", "Cluster"):
        return []
    template = obj.spec.tosca
    if not template:
        return []
    return [Finding(field, reason) for field, reason in await tosca.problems(template)]


def _common(obj: Kind) -> Iterator[Finding]:
    namespace = obj.metadata.namespace
    for index, owner in enumerate(obj.metadata.owners):
        yield from identifier(owner.name, join("metadata.owners", index, "name"))
        if owner.namespace is not None and owner.namespace != namespace:
            yield Finding(
                join("metadata.owners", index, "namespace"),
                f"must be the object's own namespace {namespace!r} (or none, for a "
                "cluster-wide owner): references stay inside a namespace",
            )


def _cluster(obj: Any) -> Iterator[Finding]:
    spec = obj.spec
    cloud = spec.constraints.cloud
    if spec.mode == "pull":
        if spec.kubeconfig is not None:
            yield Finding(
                "spec.kubeconfig",
                "must be empty on a pull cluster: its agent dials the hub, which holds no "
                "credential of it (docs/pull-mode.md)",
            )
    elif spec.kubeconfig is None:
        if not (spec.tosca or cloud.labels or cloud.metrics):  # else: to be built on a cloud
            yield Finding(
                "spec.kubeconfig",
                "is required (or, for a cluster to be created on a cloud, spec.tosca or "
                "cloud constraints)",
            )
    else:
        yield from check_kubeconfig(spec.kubeconfig, "spec.kubeconfig")
    for index, metric in enumerate(spec.metrics):
        yield from identifier(metric.name, join("spec.metrics", index, "name"), "a metric name")


def _application(obj: Any) -> Iterator[Finding]:
    spec = obj.spec
    if spec.manifest or not (spec.tosca or spec.csar):  # Krake: one of the three
        yield from check_manifest(spec.manifest, "spec.manifest")
    for field, reason in observer_schema.problems(
        spec.observer_schema, spec.manifest, "spec.observer_schema"
    ):
        yield Finding(field, reason)


def _metric(obj: Any) -> Iterator[Finding]:
    provider = obj.spec.provider
    yield from identifier(provider.name, "spec.provider.name", "a provider name")
    yield from identifier(provider.metric, "spec.provider.metric", "a metric name")


def _provider(obj: Any) -> Iterator[Finding]:
    static = obj.spec.static
    for name in static.metrics if static is not None else ():
        yield from identifier(name, join("spec.static.metrics", name), "a metric name")


def _cloud(obj: Any) -> Iterator[Finding]:
    openstack = obj.spec.openstack
    if openstack.infrastructure_provider is not None:
        name = openstack.infrastructure_provider.name
        yield from identifier(name, "spec.openstack.infrastructure_provider.name")
    for index, metric in enumerate(openstack.metrics):
        where = join("spec.openstack.metrics", index, "name")
        yield from identifier(metric.name, where, "a metric name")


def _event(obj: Any) -> Iterator[Finding]:
    yield from involved_in_namespace(obj.involved_object.namespace, obj.metadata.namespace)


def involved_in_namespace(involved: str | None, namespace: str | None) -> Iterator[Finding]:
    """An event tells of an object of its own namespace (or of a cluster-wide one)."""
    if involved is not None and involved != (namespace or "default"):
        yield Finding(
            "involved_object.namespace",
            f"must be the event's own namespace {namespace!r} (or none, for a cluster-wide "
            "object): references stay inside a namespace",
        )


_RULES: dict[tuple[str, str], Rule] = {
    ("core", "Event"): _event,
    ("kubernetes", "Cluster"): _cluster,
    ("kubernetes", "Application"): _application,
    ("core", "GlobalMetric"): _metric,
    ("core", "Metric"): _metric,
    ("core", "GlobalMetricsProvider"): _provider,
    ("core", "MetricsProvider"): _provider,
    ("core", "Role"): lambda obj: check_rules(obj.rules, "rules"),
    ("core", "RoleBinding"): lambda obj: check_binding(obj.users, obj.roles),
    ("infrastructure", "Cloud"): _cloud,
    ("infrastructure", "GlobalCloud"): _cloud,
}
