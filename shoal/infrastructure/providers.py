"""Infrastructure providers: the services that build clusters on a cloud.

A provider is chosen by its ``spec.type`` (``shoal.infrastructure.registry``). Every one answers the
same six calls, keyed by the infrastructure id the provider gave:

- ``find(key)``: the id of the infrastructure made for ``key``, if one exists;
- ``create(key, template)``: make one, marked with ``key``; its id;
- ``state(id)``, ``kubeconfig(id)``, ``reconcile(id, template)``, ``delete(id)``.

``key`` names one cluster for ever (its name and uid): the controller calls
``find`` before ``create``, so a controller killed after a create but before it
recorded the id finds that infrastructure again instead of making a second.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol

import aiohttp

from shoal.model.base import ReasonCode


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
    except TimeoutError as error:
        raise ProviderError(f"{what}: no answer in time ({method} {url})", code) from error
    except (aiohttp.ClientError, OSError) as error:
        raise ProviderError(f"{what}: {type(error).__name__}: {error}", code) from error
