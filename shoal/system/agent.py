"""The cluster agent's process (``shoal agent``): one agent, served until a signal.

``shoal agent --kubeconfig FILE`` serves the agent of any cluster, without the API;
``shoal agent --cluster NAME`` reads the cluster's kubeconfig through the API and keeps
the agent's URL in the cluster's status, as ``shoal up``'s agents do
(``shoal.agent.local.LocalAgents``, which both use).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shoal.system.process import configure_logging, console, run_until_signal

log = logging.getLogger(__name__)


class NoKubeconfig(LookupError):
    """The cluster has no kubeconfig yet, and no ``--kubeconfig`` file was given."""


def settings_of(path: Path | None, cluster: str | None = None) -> Any:
    """The agent's settings (an ``AgentConfig``) from ``path`` (None: the defaults), for
    ``cluster``: read before anything starts, so that a wrong file fails first."""
    from shoal.agent.config import AgentConfig

    return AgentConfig.from_file(path, cluster=cluster)


def run_agent_alone(
    kubeconfig: Path | None, settings: Any, host: str, port: int, log_level: str
) -> None:
    """The agent of the cluster of ``kubeconfig`` (None: $KUBECONFIG, ~/.kube/config),
    with no API, until a signal."""
    from shoal.agent.server import run_agent
    from shoal.machinery.kubeconfig import read_kubeconfig

    configure_logging(log_level)
    member = read_kubeconfig(str(kubeconfig) if kubeconfig else None)
    run_until_signal(lambda: run_agent(member, settings, host, port))


def run_registered_agent(
    url: str,
    credentials: Callable[[], Any],
    cluster: str,
    namespace: str,
    settings: Any,
    *,
    kubeconfig: Path | None,
    host: str,
    port: int,
    advertise: str | None,
    log_level: str,
) -> None:
    """The agent of the registered cluster ``namespace/cluster``, its URL (``advertise``,
    else where it listens) kept in the cluster's status, until a signal; unregistered at
    the end. ``NoKubeconfig`` when neither the cluster nor ``kubeconfig`` has one."""
    configure_logging(log_level)
    found = credentials()

    async def run() -> None:
        from shoal.agent.local import LocalAgents
        from shoal.client.rest import ShoalClient
        from shoal.machinery.kubeconfig import read_kubeconfig
        from shoal.model.kubernetes import Cluster

        async with ShoalClient(url, token=found.token, ssl_context=found.ssl_context()) as client:
            stored = await client.get(Cluster, cluster, namespace)
            member = stored.spec.kubeconfig or (
                read_kubeconfig(str(kubeconfig)) if kubeconfig else None
            )
            if member is None:
                raise NoKubeconfig(f"cluster {namespace}/{cluster} has no kubeconfig yet")
            agents = LocalAgents(client, namespace, keep=True)
            running = await agents.start(
                cluster, member, port, host=host, advertise=advertise, settings=settings
            )
            console.print(f"agent of cluster {namespace}/{cluster} on {running.url}")
            try:
                await running.task
            finally:
                with contextlib.suppress(Exception):  # the API may have gone first
                    await agents.close(unregister=True)

    run_until_signal(run)
