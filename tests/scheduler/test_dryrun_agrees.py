"""The API's dry run decides as the running scheduler does, with the scheduler's own
configuration: a scheduler started with a non-default one and the dry run agree on 1,000
random applications, and the dry run says which configuration it used. A scheduler
process campaigning for a lease of another name than ``scheduler`` is the one the dry run
follows too.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import yaml

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application
from shoal.model.scheduling import LEASE_LABEL, SchedulerConfiguration
from shoal.testing import launch, shipped
from shoal.testing.builders import NS, app, cluster, metric, provider, register
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
            predicted = await _predict(http, apps, "schedulerconfigurations/scheduler")
            placed_on = await _place(client, apps, predicted)
    # two constraints may contradict: nowhere, for the dry run and the scheduler alike
    assert 0 < sum(1 for chosen in predicted.values() if chosen is None) < 200
    disagree = {n: (predicted[n], placed_on[n]) for n in predicted if predicted[n] != placed_on[n]}
    assert disagree == {}
    on_cordoned = sum(1 for chosen in predicted.values() if chosen in CORDONED)
    assert on_cordoned > 100  # the scheduler's configuration, not the defaults, decided


async def test_a_scheduler_process_on_a_lease_of_its_own_and_the_dry_run_agree(
    api: ApiServer, client: ShoalClient, tmp_path: Path
) -> None:
    """``shoal scheduler --leader-elect --lease-name west --config C``: the dry run decides
    with C, and says it is the configuration of the scheduler of lease ``west``."""
    await _fleet(client)
    # what a scheduler of the default lease left behind: the defaults
    await client.create(SchedulerConfiguration(metadata=Metadata(name="scheduler")))
    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump({"scheduler": CONFIG.model_dump(mode="json")}))
    rng = random.Random(48)
    apps = [app(f"w{i}", labels=_random_labels(rng)) for i in range(300)]
    admin = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
    scheduler = launch.controller(
        "scheduler", api.url, "--leader-elect", "--lease-name", "west", "--config", str(config)
    )
    try:

        async def published() -> bool:
            found = await client.get(SchedulerConfiguration, "scheduler")
            return found.metadata.labels.get(LEASE_LABEL) == "west" and found.spec == CONFIG

        await wait_for(published, timeout=60, interval=0.2)
        async with httpx.AsyncClient(base_url=api.url, headers=admin) as http:
            predicted = await _predict(
                http, apps, "schedulerconfigurations/scheduler (scheduler of lease west)"
            )
        placed_on = await _place(client, apps, predicted)
    finally:
        stopped = await launch.terminate(scheduler)
    assert stopped == 0
    disagree = {n: (predicted[n], placed_on[n]) for n in predicted if predicted[n] != placed_on[n]}
    assert disagree == {}
    on_cordoned = sum(1 for chosen in predicted.values() if chosen in CORDONED)
    assert on_cordoned > 30  # the configuration of the scheduler of lease west decided


async def _predict(
    http: httpx.AsyncClient, apps: list[Application], configuration: str
) -> dict[str, str | None]:
    """Where the dry run places each application, with ``configuration``."""
    predicted = {}
    for application in apps:
        result = await _dryrun(http, application)
        assert result["configuration"] == configuration
        predicted[application.metadata.name] = result["chosen"]
    return predicted


async def _place(
    client: ShoalClient, apps: list[Application], predicted: dict[str, str | None]
) -> dict[str, str | None]:
    """Create ``apps``; where each one is once every one the dry run placed is bound."""
    for application in apps:
        await client.create(application)

    async def placed() -> dict[str, str | None]:
        items = (await client.list(Application, NS)).items
        where = {
            a.metadata.name: a.status.scheduled_to.name if a.status.scheduled_to else None
            for a in items
        }
        done = all(where[n] is not None for n, c in predicted.items() if c is not None)
        return where if done else {}

    placed: dict[str, str | None] = await wait_for(placed, timeout=90, interval=0.5)
    return placed


async def _dryrun(http: httpx.AsyncClient, application: Application) -> dict[str, Any]:
    body = application.model_dump(mode="json", exclude_none=True)
    response = await http.post(f"/scheduling/namespaces/{NS}/dryrun", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result
