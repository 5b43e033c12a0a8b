"""Agents for clusters whose kubeconfigs this process holds (``shoal up``, tests, benches).

Each agent serves on the running loop and registers its URL in its
Cluster's status, as ``shoal agent --cluster`` does, so the fleet scheduler
finds it through the API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shoal.agent.callers import digests
from shoal.agent.config import AgentConfig
from shoal.agent.register import KEEP_EVERY, keep_registered, set_agent_url
from shoal.agent.server import AgentServer, start_agent
from shoal.client.rest import ShoalClient
from shoal.machinery.types import Obj


@dataclass
class LocalAgents:
    """The agents started here, by cluster name (clusters in ``namespace``)."""

    client: ShoalClient
    namespace: str = "default"
    servers: dict[str, AgentServer] = field(default_factory=dict)
    callers: frozenset[bytes] | None = None  # None: $SHOAL_AGENT_CALLERS, or anyone
    keep: bool = False  # keep each registration (a cluster registered again gets it back)
    keep_every: float = KEEP_EVERY
    keepers: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    async def start(self, name: str, kubeconfig: Obj, port: int = 0, *,
                    host: str = "127.0.0.1", advertise: str | None = None,
                    settings: AgentConfig | None = None, **config: Any) -> AgentServer:
        """The agent of cluster ``name`` on ``host:port``, registered at ``advertise`` (else
        where it listens); with ``settings`` (``shoal agent --config``), or the defaults
        with ``config``."""
        settings = settings or AgentConfig(cluster=name, **config)
        server = await start_agent(kubeconfig, settings, host, port, callers=self.callers)
        self.servers[name] = server
        url = advertise or server.url
        await set_agent_url(self.client, name, self.namespace, url)
        if self.keep:
            self.keepers[name] = asyncio.create_task(
                keep_registered(self.client, name, self.namespace, url, self.keep_every)
            )
        return server

    async def stop(self, name: str, unregister: bool = False) -> None:
        keeper = self.keepers.pop(name, None)
        if keeper is not None:
            keeper.cancel()
        server = self.servers.pop(name)
        await server.stop()
        if unregister:
            await set_agent_url(self.client, name, self.namespace, "")

    async def close(self, unregister: bool = False) -> None:
        for name in list(self.servers):
            await self.stop(name, unregister)


async def start_all(client: ShoalClient, kubeconfigs: dict[str, Obj],
                    namespace: str = "default",
                    callers: Iterable[str] | None = None, keep: bool = False) -> LocalAgents:
    """One registered agent per cluster of ``kubeconfigs`` (name → kubeconfig);
    ``callers``: the tokens they answer (the fleet scheduler's); ``keep``: registrations
    kept (``shoal up``: a cluster deleted and registered again finds its agent again)."""
    agents = LocalAgents(client, namespace, callers=digests(callers) if callers else None,
                         keep=keep)
    for name, kubeconfig in kubeconfigs.items():
        await agents.start(name, kubeconfig)
    return agents
