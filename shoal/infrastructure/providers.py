"""Infrastructure providers: the services that build clusters on a cloud.

A provider is chosen by its ``spec.type`` (``shoal.infrastructure.registry``). Every one answers the
same six calls, keyed by the infrastructure id the provider gave:

- ``find(key)``: the id of the infrastructure made for ``key``, if one exists;
- ``create(key, template)``: make one, marked with ``key``; its id;
- ``state(id)``, ``kubeconfig(id)``, ``reconcile(id, template)``, ``delete(id)``.

``key`` names one cluster for ever (its name and uid): the controller calls
``find`` before ``create``, so a controller killed after a create but before it
recorded the id finds that infrastructure again instead of making a second.

Where the calls go: the provider a cloud names is the one the API resolved when
the cloud was written (``resolve``), and a URL of a namespaced provider or a
template's URL is a tenant's: it is fetched on the session of the outbound
policy (``shoal.machinery.outbound``), which refuses loopback, link-local and
private addresses unless the administrator lists them.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any, Protocol

import aiohttp
import yaml

from shoal.client.rest import NotFound, ShoalClient
from shoal.machinery.outbound import OutboundRefused, read_at_most
from shoal.model.base import ReasonCode
from shoal.model.infrastructure import GlobalInfrastructureProvider, InfrastructureProvider
from shoal.model.tosca import load_yaml


class InfrastructureState(enum.Enum):
    """What a provider says of one infrastructure (Krake's generic states)."""

    PENDING = "PENDING"
    CREATING = "CREATING"
    CONFIGURED = "CONFIGURED"
    UNCONFIGURED = "UNCONFIGURED"
    DELETING = "DELETING"
    FAILED = "FAILED"


class ProviderError(Exception):
    """A provider call failed; ``code`` is the reason the cluster shows."""

    def __init__(self, message: str, code: ReasonCode = ReasonCode.CREATE_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class InfrastructureNotFound(ProviderError):
    """The provider has no infrastructure of that id (deleted, or never made)."""

    def __init__(self, infrastructure_id: str) -> None:
        super().__init__(
            f"infrastructure {infrastructure_id} not found", ReasonCode.RESOURCE_NOT_FOUND
        )


class Provider(Protocol):
    name: str

    async def find(self, key: str) -> str | None: ...

    async def create(self, key: str, template: dict[str, Any]) -> str: ...

    async def state(self, infrastructure_id: str) -> InfrastructureState: ...

    async def kubeconfig(self, infrastructure_id: str) -> dict[str, Any]: ...

    async def reconcile(self, infrastructure_id: str, template: dict[str, Any]) -> None: ...

    async def reconfigure(self, infrastructure_id: str) -> None: ...

    async def delete(self, infrastructure_id: str) -> None: ...


async def answer(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    what: str,
    code: ReasonCode,
    **kwargs: Any,
) -> tuple[int, str]:
    """Status and body of one call; a connection error is a ``ProviderError`` naming ``what``."""
    try:
        async with session.request(method, url, **kwargs) as response:
            return response.status, await response.text()
    except OutboundRefused as error:
        raise ProviderError(f"{what}: {error}", ReasonCode.INVALID_RESOURCE) from error
    except TimeoutError as error:
        raise ProviderError(f"{what}: no answer in time ({method} {url})", code) from error
    except (aiohttp.ClientError, OSError) as error:
        raise ProviderError(f"{what}: {type(error).__name__}: {error}", code) from error


async def resolve(client: ShoalClient, cloud: Any) -> Any:
    """The provider ``cloud`` sends its password to: the one its reference named when the
    cloud was written (the uid the API recorded), never another of the same name."""
    where = f"{cloud.kind} {cloud.metadata.name}"
    ref = cloud.spec.openstack.infrastructure_provider
    if ref is None:
        raise ProviderError(f"{where} names no infrastructure provider",
                            ReasonCode.INVALID_RESOURCE)  # fmt: skip
    namespace = cloud.metadata.namespace
    if ref.namespaced and namespace is None:
        raise ProviderError(f"{where} is cluster-wide and names a namespaced provider",
                            ReasonCode.INVALID_RESOURCE)  # fmt: skip
    kind: Any = InfrastructureProvider if ref.namespaced else GlobalInfrastructureProvider
    try:
        provider = await client.get(kind, ref.name, namespace if ref.namespaced else None)
    except NotFound as error:
        raise ProviderError(f"{kind.kind_name()} {ref.name} (of {where}) does not exist",
                            ReasonCode.INVALID_RESOURCE) from error  # fmt: skip
    recorded = ref.uid
    if recorded is None and ref.namespaced:
        raise ProviderError(
            f"{where} was written before its provider {ref.name} existed: write the cloud "
            "again (with its password) so that it names that provider",
            ReasonCode.INVALID_RESOURCE,
        )
    if recorded is not None and provider.metadata.uid != recorded:
        raise ProviderError(
            f"{kind.kind_name()} {ref.name} is not the provider {where} named when its "
            "password was stored (made again since): write the cloud again, with its password",
            ReasonCode.INVALID_RESOURCE,
        )
    section = getattr(provider.spec, provider.spec.type, None)
    if ref.url is not None and getattr(section, "url", None) != ref.url:
        raise ProviderError(
            f"{kind.kind_name()} {ref.name} points elsewhere than when {where}'s password was "
            "stored: write the cloud again, with its password",
            ReasonCode.INVALID_RESOURCE,
        )
    if provider.spec.type == "sim" and provider.metadata.namespace is not None:
        raise ProviderError(f"the sim provider {ref.name} of namespace {namespace} is refused: "
                            "sim providers are for administrators (global only)",
                            ReasonCode.INVALID_RESOURCE)  # fmt: skip
    return provider


def tenants(provider: Any) -> bool:
    """Whether ``provider``'s URL is a tenant's (a namespaced provider's) or the
    administrator's (a global one's: only administrators write cluster-wide kinds)."""
    return provider.metadata.namespace is not None


TEMPLATE_LIMIT = 1 << 20
"""The largest template read from a URL, in bytes."""


async def fetch_template(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    """A TOSCA template read from ``url`` on ``session`` (a tenant's URL: the policy's)."""
    code = ReasonCode.INVALID_TOSCA_MANIFEST
    try:
        async with session.get(url, allow_redirects=False) as response:
            raw = await read_at_most(response.content, TEMPLATE_LIMIT)
            if len(raw) > TEMPLATE_LIMIT:
                raise ProviderError(f"{url}: larger than {TEMPLATE_LIMIT} bytes", code)
            text = raw.decode(errors="replace")
            if response.status != 200:
                raise ProviderError(f"{url}: HTTP {response.status}", code)
    except OutboundRefused as error:
        raise ProviderError(str(error), ReasonCode.INVALID_RESOURCE) from error
    except TimeoutError as error:
        raise ProviderError(f"{url}: no answer in time", code) from error
    except (aiohttp.ClientError, OSError) as error:
        raise ProviderError(f"{url}: {error}", code) from error
    try:
        loaded = await asyncio.to_thread(load_yaml, text)  # a second for the largest
    except yaml.YAMLError as error:
        raise ProviderError(f"{url} is not YAML: {error}", code) from error
    if not isinstance(loaded, dict):
        raise ProviderError(f"{url} is not a TOSCA template", code)
    return loaded
