"""Serve a cluster agent: ``start_agent``, ``run_agent``.

``start_agent`` serves on the running loop and returns once the agent accepts
requests (tests, ``shoal up``); ``run_agent`` serves until cancelled. The process
(``shoal agent``) is assembled in ``shoal.system.agent``, as every Shoal process is.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from shoal.agent.agent import Agent
from shoal.agent.app import create_app
from shoal.agent.callers import from_environment
from shoal.agent.config import AgentConfig
from shoal.machinery.server import Served, listen, serve
from shoal.machinery.tls import Tls
from shoal.machinery.types import Obj

DEFAULT_PORT = 8090
GRACE = 1  # seconds


@dataclass
class AgentServer:
    url: str
    agent: Agent
    served: Served

    @property
    def task(self) -> asyncio.Task[None]:
        return self.served.task

    async def stop(self) -> None:
        """Stop serving (requests still open are cut after ``GRACE`` s), then the agent."""
        await self.served.stop()
        await self.agent.close()


async def start_agent(
    kubeconfig: Obj,
    config: AgentConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: Tls | None = None,
    callers: frozenset[bytes] | None = None,
) -> AgentServer:
    """Connect to the member cluster, fill the cache, and serve on ``host:port`` (0: any).

    ``tls``: serve HTTPS with that certificate (and, with a client CA, ask for client
    certificates). ``callers``: digests of the tokens answered (``shoal.agent.callers``);
    None: those of ``SHOAL_AGENT_CALLERS``, or anyone when it is not set.
    """
    if callers is None:
        callers = from_environment()
    agent = await Agent.open(kubeconfig, config or AgentConfig())
    try:
        served = await serve(create_app(agent, callers), listen(host, port, 1024), host, tls=tls,
                             grace=GRACE)
    except BaseException:
        await agent.close()
        raise
    return AgentServer(served.url, agent, served)


async def run_agent(kubeconfig: Obj, config: AgentConfig | None = None,
                    host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Serve until cancelled."""
    running = await start_agent(kubeconfig, config, host, port)
    logging.getLogger(__name__).info("cluster agent listening on %s", running.url)
    try:
        await running.task
    finally:
        await running.stop()
