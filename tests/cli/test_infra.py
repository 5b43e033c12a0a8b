"""shoal infra: global clouds and clouds."""

from __future__ import annotations

from shoal.client.rest import ShoalClient
from shoal.model.infrastructure import Cloud, GlobalCloud
from tests.cli.conftest import Shoal, cli_ok, ok


async def test_global_cloud_lifecycle(shoal: Shoal, client: ShoalClient) -> None:
    await cli_ok(
        shoal,
        "infra gc register os1 --url https://keystone:5000/v3 --username admin "
        "--password secret --project shoal --global-metric price 2 -l "
        "location=DE",
    )
    cloud = await client.get(GlobalCloud, "os1")
    openstack = cloud.spec.openstack
    assert openstack.url == "https://keystone:5000/v3"
    assert openstack.auth.password.user.username == "admin"
    assert openstack.auth.password.user.password == "secret"
    assert openstack.auth.password.user.domain_name == "Default"
    assert openstack.auth.password.project.name == "shoal"
    assert [(m.name, m.weight, m.namespaced) for m in openstack.metrics] == [("price", 2.0, False)]

    table = ok(await shoal("infra", "gc", "list")).stdout.splitlines()
    assert table[0].split() == ["NAME", "TYPE", "URL", "STATE", "LABELS", "METRICS", "AGE"]
    assert table[1].split()[:6] == [
        "os1",
        "openstack",
        "https://keystone:5000/v3",
        "ONLINE",
        "location=DE",
        "price:2",
    ]

    ok(
        await shoal(
            "infra", "gc", "update", "os1", "--password", "new", "--global-metric", "load", "1"
        )
    )
    cloud = await client.get(GlobalCloud, "os1")
    assert cloud.spec.openstack.auth.password.user.password == "new"
    assert cloud.spec.openstack.auth.password.user.username == "admin"
    assert [m.name for m in cloud.spec.openstack.metrics] == ["price", "load"]  # added
    ok(await shoal("infra", "gc", "update", "os1", "--set-metrics", "--global-metric", "load", "1"))
    cloud = await client.get(GlobalCloud, "os1")
    assert [m.name for m in cloud.spec.openstack.metrics] == ["load"]  # replaced

    bad = await shoal("infra", "gc", "update", "os1", "--url", "keystone")
    assert bad.exit_code == 1 and "spec.openstack.url" in bad.stderr
    ok(await shoal("infra", "gc", "delete", "os1"))


async def test_namespaced_cloud(shoal: Shoal, client: ShoalClient) -> None:
    await cli_ok(
        shoal,
        "infra cloud register c1 -n team-a --url http://keystone --user u "
        "--password p --project proj --metric load 1",
    )
    cloud = await client.get(Cloud, "c1", "team-a")
    assert [(m.name, m.namespaced) for m in cloud.spec.openstack.metrics] == [("load", True)]
    assert "c1" in ok(await shoal("infra", "cloud", "get", "c1", "-n", "team-a")).stdout
