"""A real Shoal with ``shoal sim`` clusters, as ``shoal up`` runs it, for end-to-end tests.

The API, the scheduler and every controller of ``shoal.system.components``
run in the test process with ``shoal up``'s sample metrics and ``shoal sim``
clusters (three: DE, FR, FI), plus a few applications. The dashboard
tests and the CLI tests of describe and cluster maintenance share it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.api.server import ApiServer, start_api
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application, Cluster, ClusterState
from shoal.model.scheduler_config import SchedulerConfig
from shoal.sim.server import SimServer
from shoal.store.sqlite import SqliteStore
from shoal.system import components, demo
from shoal.testing import shipped
from shoal.testing.wait import wait_for
from tests.kube.conftest import application

# Metrics are re-read often so that a changed value moves applications within a second.
CONFIG = SchedulerConfig.model_validate(
    {
        "metrics_refresh": 0.5,
        "reschedule_after": 600,
        "retries": 3,
        "backoff": {"initial": 0.2, "cap": 1},
        "min_migration_interval": 0,  # moves follow the metrics at once (no pacing)
    }
)
# name → (label constraints, labels): spread over the three clusters of the sample fleet.
APPS: dict[str, tuple[list[str], dict[str, str]]] = {
    "web": (["location in (DE, FR)"], {"tier": "web", "team": "shop"}),
    "checkout": (["location in (DE, FR)"], {"tier": "web", "team": "shop"}),
    "search": ([], {"tier": "api", "team": "shop"}),
    "reports": (["location is DE"], {"tier": "batch", "team": "finance"}),
    "ledger": (["location is DE"], {"tier": "api", "team": "finance"}),
    "edge-cache": (["location is FI"], {"tier": "web", "team": "edge"}),
    "nowhere": (["location is US"], {"tier": "batch", "team": "edge"}),
}


@dataclass
class Shoal:
    api: ApiServer
    client: ShoalClient
    sim: SimServer
    running: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.api.url

    async def set_metric(self, name: str, value: float) -> None:
        """Change one value of ``shoal up``'s static provider ``sample``."""
        from shoal.model.core import GlobalMetricsProvider

        provider = await self.client.get(GlobalMetricsProvider, "sample")
        assert provider.spec.static is not None
        provider.spec.static.metrics[name] = value
        await self.client.update(provider)

    async def app(self, name: str) -> Application:
        return await self.client.get(Application, name, "default")


def app_with_labels(name: str) -> Application:
    constraints, labels = APPS[name]
    app = application(name, constraints, replicas=1)
    app.metadata.labels = labels
    return app


@contextlib.asynccontextmanager
async def running_shoal(tmp_path: Path) -> AsyncIterator[Shoal]:
    """Shoal with its simulated clusters and the applications of ``APPS``, stopped on exit."""
    api = await start_api(SqliteStore(":memory:"), security=shipped.security())
    api.own_store = True
    callers = shipped.Callers(api.url)  # each component as itself, as under ``shoal up``
    client = callers(shipped.ADMIN)
    running: list[Any] = [components.scheduler(callers(components.SCHEDULER), CONFIG)]
    running += [c.build(callers(c.name)) for c in components.CONTROLLERS]
    sim = None
    try:
        for controller in running:
            await controller.start()
        await demo.sample_metrics(client)
        started = await demo.start_sim_fleet(client, tmp_path, 3, 3)
        sim = started[0] if isinstance(started, tuple) else started  # (sim, restarted)
        await wait_for(lambda: _all_online(client), timeout=30, message="sim clusters ONLINE")
        for name in APPS:
            await client.create(app_with_labels(name))
        yield Shoal(api, client, sim, running)
    finally:
        for controller in reversed(running):
            with contextlib.suppress(Exception):
                await controller.stop()
        if sim is not None:
            await sim.stop()
        await callers.close()
        await api.stop()


async def _all_online(client: ShoalClient) -> bool:
    """Every sim cluster observed ONLINE: a decision then ranks all three, so the pages
    show a label rejection (sim-3) rather than a cluster not yet observed."""
    clusters = (await client.list(Cluster, "default")).items
    return len(clusters) == 3 and all(c.status.state is ClusterState.ONLINE for c in clusters)
