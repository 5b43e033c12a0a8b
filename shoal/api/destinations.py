"""Where a write sends Shoal's processes: tenants' URLs under the outbound policy, and the
infrastructure provider a cloud names resolved once, when the cloud is written.

Whose URL is it: a URL in a cluster-wide object (GlobalInfrastructureProvider,
GlobalMetricsProvider) is the administrator's, since only administrators write
cluster-wide kinds; a URL in a namespaced object (InfrastructureProvider,
MetricsProvider, a Cluster's ``spec.tosca``) is a tenant's, whoever wrote it,
and must pass the outbound policy (``shoal.machinery.outbound``). The API
refuses such a URL with a 422 naming the field when it can tell; the process
that fetches checks again when it connects.

A cloud's provider: ``spec.openstack.infrastructure_provider`` names a global
provider, or with ``namespaced: true`` one of the cloud's namespace. The API
records the ``uid`` and the URL of the provider it names at each write; the
infrastructure controller sends the cloud's password only to that provider at
that URL. A provider made later under the same name, or the same provider
pointed elsewhere, changes nothing until the cloud is written again, and a
write that keeps the password by sending the placeholder cannot move the
reference (``SecuredStore``).
"""

from __future__ import annotations

from typing import Any

import orjson

from shoal.machinery import outbound
from shoal.machinery.problems import ProblemError
from shoal.model.infrastructure import GlobalInfrastructureProvider, InfrastructureProvider
from shoal.store.base import NotFound, Store

ADMINISTRATORS_ONLY = (
    "the sim provider is for administrators: a GlobalInfrastructureProvider only (it drives "
    "the simulator's admin API, which serves every simulated cluster)"
)
PROVIDER_KINDS = frozenset({"InfrastructureProvider", "MetricsProvider"})
"""Kinds whose ``spec.<type>.url`` a controller fetches."""


def tenant_urls(obj: Any) -> list[tuple[str, str]]:
    """(field, URL) of every URL in ``obj`` that a controller fetches and a tenant gave."""
    if obj.metadata.namespace is None:
        return []  # a cluster-wide object: the administrator's
    found: list[tuple[str, str]] = []
    if obj.kind in PROVIDER_KINDS:
        kind = obj.spec.type
        url = getattr(getattr(obj.spec, kind, None), "url", None)
        if isinstance(url, str):
            found.append((f"spec.{kind}.url", url))
    elif obj.kind == "Cluster" and isinstance(obj.spec.tosca, str):
        found.append(("spec.tosca", obj.spec.tosca))
    return found


async def admit_destinations(store: Store, obj: Any) -> None:
    """Refuse a tenant's URL the outbound policy refuses; record a cloud's provider."""
    if obj.kind == "InfrastructureProvider" and obj.spec.type == "sim":
        raise _invalid("spec.type", ADMINISTRATORS_ONLY)
    policy = outbound.policy()
    for field, url in tenant_urls(obj):
        reason = await policy.refusal(url)
        if reason is not None:
            raise _invalid(field, f"{reason}: refused by the administrator's outbound policy")
    if obj.kind in ("Cloud", "GlobalCloud"):
        await _record_provider(store, obj)


async def _record_provider(store: Store, cloud: Any) -> None:
    ref = cloud.spec.openstack.infrastructure_provider
    if ref is None:
        return
    field = "spec.openstack.infrastructure_provider"
    if ref.namespaced and cloud.metadata.namespace is None:
        raise _invalid(f"{field}.namespaced", "a GlobalCloud names a global provider only")
    kind = InfrastructureProvider if ref.namespaced else GlobalInfrastructureProvider
    try:
        record = await store.get(kind.key(ref.name, cloud.metadata.namespace))
    except NotFound:
        ref.uid = ref.url = None  # none yet (a namespaced one: not used until written again)
        return
    provider = orjson.loads(record.value)
    ref.uid = provider["metadata"]["uid"]
    spec = provider.get("spec") or {}
    ref.url = (spec.get(spec.get("type") or "") or {}).get("url")


def _invalid(field: str, reason: str) -> ProblemError:
    return ProblemError(
        422, f"{field}: {reason}", errors=[{"field": field, "reason": reason}]
    )
