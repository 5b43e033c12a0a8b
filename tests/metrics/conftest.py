"""Fixtures of the metric provider and cache tests: real and fake provider servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from tests.fixtures.fake_influx2 import FakeInflux2, serve_fake_influx2
from tests.fixtures.fake_ksqldb import FakeKsqlDB, serve_fake_ksqldb
from tests.fixtures.influx import InfluxServer, start_influxd
from tests.fixtures.prometheus import PrometheusServer, start_prometheus

#: Gauges the ``prometheus`` fixture exports (fixed: the server is shared by the session).
PROMETHEUS_METRICS = {"shoal_load": 0.25, "shoal_cost": 3.0, "shoal_zero": 0.0, "shoal_heat": 7.5}


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusServer]:
    """A real Prometheus scraping ``PROMETHEUS_METRICS`` every second (shared)."""
    with start_prometheus(PROMETHEUS_METRICS) as server:
        yield server


@pytest.fixture(scope="session")
def influxd_session() -> Iterator[InfluxServer]:
    with start_influxd("shoal") as server:
        yield server


@pytest.fixture
def influxd(influxd_session: InfluxServer) -> InfluxServer:
    """A real InfluxDB 1.x (shared by the session) with an empty ``shoal`` database."""
    influxd_session.query(f'DROP DATABASE "{influxd_session.database}"')
    influxd_session.query(f'CREATE DATABASE "{influxd_session.database}"')
    return influxd_session


@pytest.fixture
async def fake_ksqldb() -> AsyncIterator[FakeKsqlDB]:
    """A fake ksqlDB with table ``metrics`` (key ``name``, value ``val``), empty."""
    fake = FakeKsqlDB()
    fake.table("metrics", "name", "val")
    async with serve_fake_ksqldb(fake) as served:
        yield served


@pytest.fixture
async def fake_influx2() -> AsyncIterator[FakeInflux2]:
    """A fake InfluxDB 2: org ``shoal``, token ``secret-token``, bucket ``metrics``, empty."""
    async with serve_fake_influx2() as served:
        yield served


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """The session the metric cache would give the provider clients."""
    async with aiohttp.ClientSession() as session:
        yield session
