"""shoal core: metrics, providers of every type, roles and role bindings."""

from __future__ import annotations

import json

import pytest
import yaml

from shoal.client.rest import ShoalClient
from shoal.model.core import GlobalMetric, GlobalMetricsProvider, Metric, MetricsProvider
from tests.cli.conftest import Shoal, cli, cli_ok, ok


async def test_global_metric_lifecycle(shoal: Shoal, client: ShoalClient) -> None:
    await cli_ok(
        shoal,
        "core gm create heat --min 0 --max 10 --mp-name prom --metric-name "
        "heat_demand_zone_1 --allowed-values 1 2 3.5",
    )
    metric = await client.get(GlobalMetric, "heat")
    assert (metric.spec.min, metric.spec.max) == (0, 10)
    assert (metric.spec.provider.name, metric.spec.provider.metric) == (
        "prom",
        "heat_demand_zone_1",
    )
    assert metric.spec.allowed_values == [1, 2, 3.5]

    table = ok(await shoal("core", "gm", "list")).stdout.splitlines()
    assert table[0].split() == ["NAME", "MIN", "MAX", "PROVIDER", "METRIC", "ALLOWED", "AGE"]
    assert table[1].split()[:6] == ["heat", "0", "10", "prom", "heat_demand_zone_1", "1,2,3.5"]

    ok(await shoal("core", "gm", "update", "heat", "--max", "20", "--allowed-values", "4,5"))
    metric = await client.get(GlobalMetric, "heat")
    assert metric.spec.max == 20 and metric.spec.min == 0
    assert metric.spec.allowed_values == [4, 5]

    bad = await shoal("core", "gm", "update", "heat", "--min", "30")
    assert bad.exit_code == 1
    assert "spec" in bad.stderr and "min (30.0) must be less than max (20.0)" in bad.stderr

    got = json.loads(ok(await shoal("core", "gm", "get", "heat", "-o", "json")).stdout)
    assert got["kind"] == "GlobalMetric"
    ok(await shoal("core", "gm", "delete", "heat"))
    assert (await shoal("core", "gm", "get", "heat")).exit_code == 1


async def test_allowed_values_not_numbers(shoal: Shoal) -> None:
    result = await cli(
        shoal,
        "core gm create x --min 0 --max 1 --mp-name p --metric-name x --allowed-values a",
    )
    assert result.exit_code == 1
    assert "--allowed-values: 'a' is not a number" in result.stderr


async def test_namespaced_metric(shoal: Shoal, client: ShoalClient) -> None:
    await cli_ok(
        shoal,
        "core m create load -n team-a --min 0 --max 1 --mp-name static1 --metric-name load",
    )
    metric = await client.get(Metric, "load", "team-a")
    assert metric.metadata.namespace == "team-a"
    assert (await shoal("core", "m", "get", "load")).exit_code == 1
    ok(await shoal("core", "m", "get", "load", "-n", "team-a"))


async def test_missing_required_option(shoal: Shoal) -> None:
    result = await shoal("core", "gm", "create", "x", "--min", "0")
    assert result.exit_code == 2
    assert "--max" in result.output


@pytest.mark.parametrize(
    ("args", "section"),
    [
        (["--type", "prometheus", "--url", "http://prom:9090"], {"url": "http://prom:9090"}),
        (
            [
                "--type",
                "influx",
                "--url",
                "http://influx:8086",
                "--token",
                "t",
                "--org",
                "o",
                "--bucket",
                "b",
            ],
            {
                "url": "http://influx:8086",
                "version": 2,
                "token": "t",
                "org": "o",
                "bucket": "b",
                "database": None,
                "username": None,
                "password": None,
            },
        ),
        (
            [
                "--type",
                "influx",
                "--url",
                "http://influx:8086",
                "--influx-version",
                "1",
                "--database",
                "metrics",
                "--username",
                "u",
                "--password",
                "p",
            ],
            {
                "url": "http://influx:8086",
                "version": 1,
                "token": None,
                "org": None,
                "bucket": None,
                "database": "metrics",
                "username": "u",
                "password": "p",
            },
        ),
        (
            [
                "--type",
                "kafka",
                "--url",
                "http://ksql:8088",
                "--table",
                "heat",
                "--comparison-column",
                "zone",
                "--value-column",
                "demand",
            ],
            {
                "url": "http://ksql:8088",
                "table": "heat",
                "comparison_column": "zone",
                "value_column": "demand",
            },
        ),
        (
            ["--type", "static", "--metric", "load", "0.5", "--metric", "price", "3"],
            {"metrics": {"load": 0.5, "price": 3.0}},
        ),
    ],
    ids=["prometheus", "influx2", "influx1", "kafka", "static"],
)
async def test_provider_types(
    shoal: Shoal, client: ShoalClient, args: list[str], section: dict[str, object]
) -> None:
    ok(await shoal("core", "gmp", "create", "p", *args))
    provider = await client.get(GlobalMetricsProvider, "p")
    ptype = args[1]
    assert provider.spec.type == ptype
    assert provider.spec.model_dump(mode="json")[ptype] == section

    ok(await shoal("core", "mp", "create", "p", "-n", "ns1", *args))
    namespaced = await client.get(MetricsProvider, "p", "ns1")
    assert namespaced.spec == provider.spec

    table = ok(await shoal("core", "gmp", "list")).stdout.splitlines()
    assert table[0].split() == ["NAME", "TYPE", "URL", "STATUS", "LAST_FETCH", "LATENCY", "AGE"]
    expected_url = section.get("url", "-")
    assert table[1].split()[:3] == ["p", ptype, expected_url]


async def test_provider_errors(shoal: Shoal) -> None:
    result = await shoal("core", "gmp", "create", "p", "--type", "influx", "--url", "http://i:1")
    assert result.exit_code == 1
    assert "spec.influx" in result.stderr and "token, org, bucket" in result.stderr

    result = await shoal("core", "gmp", "create", "p", "--type", "graphite")
    assert result.exit_code == 1
    assert "--type must be one of prometheus, influx, kafka, static" in result.stderr

    result = await shoal(
        "core", "gmp", "create", "p", "--type", "prometheus", "--url", "http://p", "--table", "t"
    )
    assert result.exit_code == 1
    assert "--table" in result.stderr and "prometheus" in result.stderr

    result = await shoal("core", "gmp", "create", "p", "--type", "prometheus", "--url", "ftp://prom")
    assert result.exit_code == 1
    assert "spec.prometheus.url" in result.stderr


async def test_provider_update(shoal: Shoal, client: ShoalClient) -> None:
    ok(await shoal("core", "gmp", "create", "p", "--type", "static", "--metric", "a", "1"))
    ok(await shoal("core", "gmp", "update", "p", "--metric", "b", "2"))
    provider = await client.get(GlobalMetricsProvider, "p")
    assert provider.spec.static is not None and provider.spec.static.metrics == {"b": 2.0}

    ok(await shoal("core", "gmp", "update", "p", "--type", "prometheus", "--url", "http://p:9090"))
    provider = await client.get(GlobalMetricsProvider, "p")
    assert provider.spec.type == "prometheus" and provider.spec.static is None
    assert provider.spec.prometheus is not None and provider.spec.prometheus.url == "http://p:9090"

    ok(await shoal("core", "gmp", "update", "p", "--url", "http://q:9090"))
    provider = await client.get(GlobalMetricsProvider, "p")
    assert provider.spec.prometheus is not None and provider.spec.prometheus.url == "http://q:9090"


async def test_roles_and_bindings(shoal: Shoal) -> None:
    await cli_ok(
        shoal,
        "core role create reader --rule "
        "kubernetes:applications,clusters::get,list --rule core:*:*:get",
    )
    role = json.loads(ok(await shoal("core", "role", "get", "reader", "-o", "json")).stdout)
    assert role["rules"] == [
        {
            "api": "kubernetes",
            "resources": ["applications", "clusters"],
            "namespaces": ["*"],  # any: every namespace, not none
            "verbs": ["get", "list"],
        },
        {"api": "core", "resources": ["*"], "namespaces": ["*"], "verbs": ["get"]},
    ]
    table = ok(await shoal("core", "role", "list")).stdout
    assert "kubernetes:applications,clusters:*:get,list" in table
    # "-": no namespace, the cluster-wide objects only
    ok(await shoal("core", "role", "create", "globals", "--rule", "core:globalmetrics:-:get"))
    role = json.loads(ok(await shoal("core", "role", "get", "globals", "-o", "json")).stdout)
    assert role["rules"][0]["namespaces"] == []
    assert "core:globalmetrics:-:get" in ok(await shoal("core", "role", "list")).stdout

    bad = await shoal("core", "role", "create", "x", "--rule", "core:metrics")
    assert bad.exit_code == 1 and "api:resources:namespaces:verbs" in bad.stderr
    bad_verb = await shoal("core", "role", "create", "x", "--rule", "core:metrics::fly")
    assert bad_verb.exit_code == 1 and "rules[0].verbs[0]" in bad_verb.stderr

    ok(await cli(shoal, "core rolebinding create b --user alice --user bob --role reader"))
    binding = yaml.safe_load(
        ok(await shoal("core", "rolebinding", "get", "b", "-o", "yaml")).stdout
    )
    assert binding["users"] == ["alice", "bob"] and binding["roles"] == ["reader"]
    listed = ok(await shoal("core", "rolebinding", "list")).stdout.splitlines()
    assert listed[0].split() == ["NAME", "USERS", "ROLES", "AGE"]
    assert listed[1].split()[:3] == ["b", "alice,bob", "reader"]
    ok(await shoal("core", "rolebinding", "update", "b", "--user", "carol"))
    binding = yaml.safe_load(
        ok(await shoal("core", "rolebinding", "get", "b", "-o", "yaml")).stdout
    )
    assert binding["users"] == ["carol"] and binding["roles"] == ["reader"]
    ok(await shoal("core", "rolebinding", "delete", "b"))
    ok(await shoal("core", "role", "delete", "reader"))
