"""Which client serves each ``spec.type`` of an InfrastructureProvider."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp

from shoal.infrastructure.im import InfrastructureManager
from shoal.infrastructure.providers import Provider, tenants
from shoal.infrastructure.sim import SimProvider
from shoal.machinery.outbound import Sessions

Factory = Callable[[Any, Any, aiohttp.ClientSession], Provider]
"""How a client is made from its InfrastructureProvider, the cloud, and a session."""

PROVIDERS: dict[str, Factory] = {"im": InfrastructureManager, "sim": SimProvider}


def provider_for(provider: Any, cloud: Any, sessions: Sessions) -> Provider:
    """The client of ``provider`` (an InfrastructureProvider) for clusters on ``cloud``: a
    namespaced provider's URL is a tenant's, called under the outbound policy."""
    return PROVIDERS[provider.spec.type](provider, cloud, sessions.of(tenants(provider)))
