"""The API's dry run decides as the running scheduler does, with the scheduler's own
configuration: a scheduler started with a non-default one and the dry run agree on 1,000
random applications, and the dry run says which configuration it used.
"""

from __future__ import annotations

import random
from typing import Any

import httpx

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from shoal.model.scheduling import SchedulerConfiguration
from shoal.testing import shipped
from shoal.testing.fleet import NS, app, cluster, metric, provider, register
from tests.scheduler import helpers as h
from tests.util import wait_for

LOCATIONS = ("DE", "FR", "US")
TIERS = ("gold", "silver")
CLUSTERS = 12
CORDONED = {"c3", "c7", "c11"}  # among the best: the defaults would never choose them

# Not the defaults: cordoned clusters stay candidates. A dry run with the default
# configuration places many of these applications elsewhere.
CONFIG = h.fast_config(
    plugins={"filters": ["label-constraints", "custom-resources", "metric-constraints"]}
)


def _random_labels(rng: random.Random) -> list[str]:
    choices = [
        lambda: f"location is {rng.choice(LOCATIONS)}",
        lambda: f"location is not {rng.choice(LOCATIONS)}",
        lambda: f"tier is {rng.choice(TIERS)}",
        lambda: f"location in ({', '.join(rng.sample(LOCATIONS, 2))})",
    ]
    return [rng.choice(choices)() for _ in range(rng.randint(0, 2))]


async def _fleet(client: ShoalClient) -> None:
    # distinct values, so that no two clusters tie (ties are broken at random)
    values = {f"c{i}": (i + 1) / (CLUSTERS + 1) for i in range(CLUSTERS)}
    await client.create(provider("st", values))
    for i in range(CLUSTERS):
        name = f"c{i}"
        await client.create(metric(f"m-{name}", "st", key=name))
        spec = cluster(
            name,
            labels={"location": LOCATIONS[i % 3], "tier": TIERS[i % 2]},
            metrics={f"m-{name}": 1},
        )
        spec.spec.unschedulable = name in CORDONED
        await register(client, spec)


async def test_a_scheduler_with_its_own_configuration_and_the_dry_run_agree(
    api: ApiServer, client: ShoalClient
) -> None:
    await _fleet(client)
    rng = random.Random(24)
    apps = [app(f"a{i}", labels=_random_labels(rng)) for i in range(1000)]
    admin = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
    async with httpx.AsyncClient(base_url=api.url, headers=admin) as http:
        before = await _dryrun(http, apps[0])
        assert before["configuration"].startswith("defaults")
        assert before["chosen"] not in CORDONED

        async with h.running(api.url, CONFIG):
            published = await client.get(SchedulerConfiguration, "scheduler")
            assert published.spec == CONFIG
            predicted = {}
            for application in apps:
                result = await _dryrun(http, application)
                assert result["configuration"] == "schedulerconfigurations/scheduler"
                predicted[application.metadata.name] = result["chosen"]
            for application in apps:
                await client.create(application)

            async def placed() -> dict[str, str | None]:
                """Where each application is, once every one the dry run placed is bound."""
                items = (await client.list(Application, NS)).items
                where = {
                    a.metadata.name: a.status.scheduled_to.name if a.status.scheduled_to else None
                    for a in items
                }
                done = all(where[n] is not None for n, c in predicted.items() if c is not None)
                return where if done else {}

            placed_on = await wait_for(placed, timeout=90, interval=0.5)
    # two constraints may contradict: nowhere, for the dry run and the scheduler alike
    assert 0 < sum(1 for chosen in predicted.values() if chosen is None) < 200
    disagree = {n: (predicted[n], placed_on[n]) for n in predicted if predicted[n] != placed_on[n]}
    assert disagree == {}
    on_cordoned = sum(1 for chosen in predicted.values() if chosen in CORDONED)
    assert on_cordoned > 100  # the scheduler's configuration, not the defaults, decided


async def _dryrun(http: httpx.AsyncClient, application: Application) -> dict[str, Any]:
    body = application.model_dump(mode="json", exclude_none=True)
    response = await http.post(f"/scheduling/namespaces/{NS}/dryrun", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result
