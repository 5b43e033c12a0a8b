"""``shoal up --single-process``: every component on one event loop in this process.

For debugging: the API, the scheduler and every controller (each on the client of its own
identity), the simulated clusters and their agents, one process to attach a debugger or
a profiler to. The steps beyond the components are those of the multi-process form
(``shoal.system.demo``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from shoal.machinery import outbound
from shoal.system.components import SCHEDULER, controllers
from shoal.system.demo import (
    banner,
    create_demo,
    outbound_policy,
    sample_metrics,
    start_sim_fleet,
)
from shoal.system.installation import Installation
from shoal.system.process import configure_logging, console, run_until_signal


def run_single_process(up: Installation) -> None:
    """Start everything on this loop; set up the fleet and the demo; run until a signal."""
    data_dir, store_url, port, tls = up.data_dir, up.store_url, up.port, up.tls
    clusters, nodes, demo, log_level = up.clusters, up.nodes, up.demo, up.log_level
    from shoal.api.auth import bootstrap
    from shoal.api.auth.roles import component_user
    from shoal.client.credentials import Credentials

    configure_logging(log_level, one_line=log_level.lower() != "debug")
    setup = bootstrap.ensure(data_dir, tls=tls)
    # the API, the scheduler and the infrastructure controller check tenants' URLs with it
    os.environ.setdefault(outbound.SETTING, str(outbound_policy(data_dir)))

    async def main() -> None:
        from shoal.api.server import start_api
        from shoal.client.rest import ShoalClient

        server = await start_api(
            store_url, "127.0.0.1", port, security=setup.security, kube_finalizer=True
        )
        console.print(f"[bold green]Shoal API[/] on {server.url}  (store {store_url})")
        trust = Credentials(ca=str(setup.ca)).ssl_context() if tls else None
        clients: list[ShoalClient] = []

        def client_of(user: str) -> ShoalClient:
            token = setup.tokens[user if user == bootstrap.ADMIN else component_user(user)]
            clients.append(ShoalClient(server.url, token=token, ssl_context=trust))
            return clients[-1]

        client = client_of(bootstrap.ADMIN)
        running = controllers(client_of, up.scheduler_config)
        tasks = [asyncio.create_task(c.run()) for c in running]
        names = ", ".join(type(c).__name__ for c in running)
        console.print(f"[bold green]Controllers[/]: {names}")
        sim = agents = None
        try:
            await sample_metrics(client)
            sim, restarted = await start_sim_fleet(client, data_dir, clusters, nodes)
            from shoal.agent.local import start_all  # one agent per cluster (fleet pods)

            kubeconfigs = {name: sim.kubeconfig(name) for name in sim.clusters.clusters}
            scheduler_token = setup.tokens[component_user(SCHEDULER)]
            agents = await start_all(
                client_of("agent"), kubeconfigs, callers=[scheduler_token], keep=True
            )
            if demo:
                await create_demo(client, [f"sim-{i + 1}" for i in range(clusters)], restarted)
            if up.exit_after_demo:
                return
            banner(setup, server.url, data_dir)
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if agents is not None:
                await agents.close()
            if sim is not None:
                await sim.stop()
            for each in clients:
                await each.close()
            await server.stop()

    run_until_signal(main, quiet=True)


