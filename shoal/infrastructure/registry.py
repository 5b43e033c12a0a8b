"""Which client serves each ``spec.type`` of an InfrastructureProvider."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp

from shoal.infrastructure.im import InfrastructureManager
from shoal.infrastructure.providers import Provider
from shoal.infrastructure.sim import SimProvider

Factory = Callable[[Any, Any, aiohttp.ClientSession], Provider]
"""How a client is made from its InfrastructureProvider, the cloud, and a session."""

PROVIDERS: dict[str, Factory] = {"im": InfrastructureManager, "sim": SimProvider}


def provider_for(provider: Any, cloud: Any, session: aiohttp.ClientSession) -> Provider:
    """The client of ``provider`` (an InfrastructureProvider) for clusters on ``cloud``."""
    return PROVIDERS[provider.spec.type](provider, cloud, session)
