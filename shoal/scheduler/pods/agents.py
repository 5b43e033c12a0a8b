"""The cluster agents the scheduler knows: found through the API, marked when they stop answering.

Every Cluster whose status names an agent URL (the agent wrote it there) is
a member of the fleet pipeline. An agent that refuses a connection, or misses
its deadline twice in a row, is marked and skipped: each request costs at most
the deadline, and a hung agent only a couple of them. A probe of its
``/healthz`` brings it back as soon as it answers again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from shoal.machinery.keepalive import CLIENT_KEEP_ALIVE
from shoal.machinery.selectors import LabelConstraint
from shoal.machinery.types import Obj
from shoal.model.kubernetes import Cluster, ClusterState

log = logging.getLogger(__name__)
PROBE_EVERY = 0.5  # seconds between two probes of a marked agent
MISSES = 2  # deadlines missed in a row that mark an agent (a refused connection marks at once)
JSON = {"Content-Type": "application/json"}
SAMPLES_IN_FLIGHT = 2  # sampling requests per agent at once: the rest wait here, not there


class AgentError(Exception):
    """No answer (refused, reset, late); ``sent``: the request may have been acted on."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass
class AgentRef:
    cluster: str
    namespace: str
    url: str
    labels: dict[str, str]
    marked: float | None = None  # monotonic time it stopped answering
    why: str = ""
    misses: int = 0  # deadlines missed in a row
    busy: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(SAMPLES_IN_FLIGHT))


class Agents:
    def __init__(self, timeout: float, token: str | None = None) -> None:
        """``token``: sent to every agent, which answers only the tokens it was given."""
        self.timeout = timeout
        self.token = token
        self.by_cluster: dict[str, AgentRef] = {}
        self.registered = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # idle connections dropped well before the agents' keep-alive: a request
            # on one the agent is closing fails, and a failed request marks the agent
            connector = aiohttp.TCPConnector(
                limit=0, ttl_dns_cache=300, keepalive_timeout=CLIENT_KEEP_ALIVE
            )
            headers = {"authorization": f"Bearer {self.token}"} if self.token else None
            self._session = aiohttp.ClientSession(connector=connector, headers=headers,
                                                  json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # membership ------------------------------------------------------------------

    def cluster_changed(self, cluster: Cluster) -> None:
        name = cluster.metadata.name
        url = cluster.status.agent
        usable = url and cluster.metadata.deleted is None and (
            cluster.status.state is not ClusterState.OFFLINE)
        if not usable:
            self.by_cluster.pop(name, None)
            return
        known = self.by_cluster.get(name)
        labels = dict(cluster.metadata.labels)
        if known is not None and known.url == url:
            known.labels = labels
            return
        self.by_cluster[name] = AgentRef(name, cluster.metadata.namespace or "default", url, labels)
        self.registered.set()

    def cluster_deleted(self, cluster: Cluster) -> None:
        self.by_cluster.pop(cluster.metadata.name, None)

    def live(self, constraints: tuple[str, ...] = ()) -> list[AgentRef]:
        return [a for a in self.matching(constraints) if a.marked is None]

    def matching(self, constraints: tuple[str, ...] = ()) -> list[AgentRef]:
        """The agents of the clusters ``constraints`` allow, marked ones too."""
        parsed = [LabelConstraint.parse(text) for text in constraints]
        return [a for a in self.by_cluster.values() if all(c.matches(a.labels) for c in parsed)]

    def mark(self, agent: AgentRef, why: str) -> None:
        if agent.marked is None:
            log.warning("agent of cluster %s (%s) marked: %s", agent.cluster, agent.url, why)
            agent.marked = time.monotonic()
        agent.why = why

    # calls -----------------------------------------------------------------------

    async def post(self, agent: AgentRef, path: str, body: Obj | None, timeout: float,
                   method: str = "POST") -> tuple[int, Any]:
        """POST JSON (or GET without a body); an answer of any status, or ``AgentError`` (the
        agent gets marked)."""
        data = None if body is None else orjson.dumps(body)
        try:
            async with asyncio.timeout(timeout):
                async with self.session.request(method, agent.url + path, data=data,
                                                headers=JSON) as resp:
                    answer = orjson.loads(await resp.read())
                    agent.misses = 0
                    return resp.status, answer
        except TimeoutError:
            error = AgentError(f"no answer within {timeout * 1000:.0f} ms", True)
            agent.misses += 1
            if agent.misses < MISSES:
                raise error from None
        except aiohttp.ClientConnectorError as exc:
            error = AgentError(f"connection refused ({exc.os_error})", False)
        except (aiohttp.ClientError, orjson.JSONDecodeError) as exc:
            error = AgentError(f"{type(exc).__name__}: {exc}", True)
        self.mark(agent, str(error))
        raise error

    async def probe(self) -> None:
        """Bring back marked agents that answer ``/healthz`` again; until cancelled."""
        while True:
            await asyncio.sleep(PROBE_EVERY)
            marked = [a for a in self.by_cluster.values() if a.marked is not None]
            await asyncio.gather(*(self._probe(a) for a in marked))

    async def _probe(self, agent: AgentRef) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                async with self.session.get(agent.url + "/healthz") as resp:
                    if resp.status != 200:
                        return
        except (TimeoutError, aiohttp.ClientError):
            return
        log.info("agent of cluster %s answers again", agent.cluster)
        agent.marked = None
        agent.why = ""
        agent.misses = 0
