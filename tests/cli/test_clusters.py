"""shoal kube cluster: register from a kubeconfig, create for clouds, list/get/update/delete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Cluster
from tests.cli.conftest import Shoal, cli_ok, ok


def kubeconfig(*names: str, current: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current or names[0],
        "preferences": {},
        "clusters": [
            {"name": n, "cluster": {"server": f"https://{n}.example.com:6443"}} for n in names
        ],
        "users": [{"name": f"{n}-admin", "user": {"token": f"t-{n}"}} for n in names],
        "contexts": [
            {"name": f"ctx-{n}", "context": {"cluster": n, "user": f"{n}-admin"}} for n in names
        ],
    }


def write(tmp_path: Path, config: dict[str, Any], name: str = "kubeconfig.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return str(path)


async def test_register_from_kubeconfig(shoal: Shoal, client: ShoalClient, tmp_path: Path) -> None:
    path = write(tmp_path, kubeconfig("kind-east"))
    result = ok(
        await shoal(
            "kube",
            "cluster",
            "register",
            "-k",
            path,
            "-l",
            "location=DE",
            "-l",
            "tier=gold",
            "--metric",
            "load",
            "1.5",
            "--global-metric",
            "price",
            "2",
            "-R",
            "crontabs.stable.example.com",
        )
    )
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "LABELS", "METRICS", "SCHEDULED_TO", "AGE"]
    assert lines[1].split()[:4] == [
        "kind-east",
        "CONNECTING",  # until the cluster observer has reached it
        "location=DE,tier=gold",
        "price:2,load:1.5",
    ]

    cluster = await client.get(Cluster, "kind-east", "default")
    assert cluster.metadata.labels == {"location": "DE", "tier": "gold"}
    refs = {(m.name, m.weight, m.namespaced) for m in cluster.spec.metrics}
    assert refs == {("load", 1.5, True), ("price", 2.0, False)}
    assert cluster.spec.custom_resources == ["crontabs.stable.example.com"]
    assert cluster.spec.kubeconfig is not None
    assert cluster.spec.kubeconfig["clusters"][0]["cluster"]["server"].startswith(
        "https://kind-east"
    )

    named = ok(await shoal("kube", "cluster", "register", "-k", path, "other", "-o", "json"))
    assert json.loads(named.stdout)["metadata"]["name"] == "other"


async def test_register_metric_as_name_equals_weight(
    shoal: Shoal, client: ShoalClient, tmp_path: Path
) -> None:
    path = write(tmp_path, kubeconfig("c1"))
    ok(await shoal("kube", "cluster", "register", "-k", path, "--metric", "load=3"))
    cluster = await client.get(Cluster, "c1", "default")
    assert [(m.name, m.weight) for m in cluster.spec.metrics] == [("load", 3.0)]


async def test_register_two_contexts_is_a_clear_error(shoal: Shoal, tmp_path: Path) -> None:
    path = write(tmp_path, kubeconfig("east", "west"))
    result = await shoal("kube", "cluster", "register", "-k", path)
    assert result.exit_code == 1
    assert "2 contexts" in result.stderr
    assert "ctx-east, ctx-west" in result.stderr
    assert "--context" in result.stderr
    assert "Traceback" not in result.output

    picked = ok(
        await shoal(
            "kube", "cluster", "register", "-k", path, "--context", "ctx-west", "-o", "json"
        )
    )
    config = json.loads(picked.stdout)["spec"]["kubeconfig"]
    assert json.loads(picked.stdout)["metadata"]["name"] == "west"
    assert [c["name"] for c in config["clusters"]] == ["west"]
    assert [u["name"] for u in config["users"]] == ["west-admin"]
    assert config["current-context"] == "ctx-west"

    unknown = await shoal("kube", "cluster", "register", "-k", path, "--context", "nope")
    assert unknown.exit_code == 1
    assert "no context 'nope'" in unknown.stderr


async def test_register_bad_metric_weight(shoal: Shoal, tmp_path: Path) -> None:
    path = write(tmp_path, kubeconfig("c1"))
    result = await shoal("kube", "cluster", "register", "-k", path, "--metric", "load", "heavy")
    assert result.exit_code != 0
    negative = await shoal("kube", "cluster", "register", "-k", path, "--metric", "load", "-1")
    assert negative.exit_code == 1
    assert "spec.metrics[0].weight" in negative.stderr


async def test_create_for_cloud_and_update(shoal: Shoal, client: ShoalClient) -> None:
    await cli_ok(
        shoal,
        "kube cluster create new -L 'location is DE' --cloud-metric-constraint "
        "'load < 2' --global-metric price 1",
    )
    cluster = await client.get(Cluster, "new", "default")
    assert cluster.spec.kubeconfig is None
    assert cluster.spec.constraints.cloud.labels == ["location is DE"]
    assert cluster.spec.constraints.cloud.metrics == ["load < 2"]

    result = await cli_ok(
        shoal,
        "kube cluster update new -l zone=a -M 'load < 5' --inherit-metrics -o yaml",
    )
    updated = yaml.safe_load(result.stdout)
    assert updated["metadata"]["labels"] == {"zone": "a"}
    assert updated["spec"]["constraints"]["cloud"] == {
        "labels": ["location is DE"],
        "metrics": ["load < 5"],
    }
    assert updated["spec"]["inherit_metrics"] is True
    assert updated["spec"]["metrics"] == [{"name": "price", "weight": 1.0, "namespaced": False}]

    bad = await shoal("kube", "cluster", "update", "new", "-L", "location is")
    assert bad.exit_code == 1
    assert "spec.constraints.cloud.labels[0]" in bad.stderr

    names = ok(await shoal("kube", "cluster", "list", "-o", "json")).stdout
    assert [c["metadata"]["name"] for c in json.loads(names)["items"]] == ["new"]
    ok(await shoal("kube", "cluster", "delete", "new"))
    gone = await shoal("kube", "cluster", "get", "new")
    assert gone.exit_code == 1 or "new" in gone.stdout


async def test_update_kubeconfig(shoal: Shoal, client: ShoalClient, tmp_path: Path) -> None:
    ok(await shoal("kube", "cluster", "register", "-k", write(tmp_path, kubeconfig("c1"))))
    moved = kubeconfig("c1")
    moved["clusters"][0]["cluster"]["server"] = "https://moved.example.com"
    ok(await shoal("kube", "cluster", "update", "c1", "-k", write(tmp_path, moved, "k2.yaml")))
    cluster = await client.get(Cluster, "c1", "default")
    assert cluster.spec.kubeconfig is not None
    assert (
        cluster.spec.kubeconfig["clusters"][0]["cluster"]["server"] == "https://moved.example.com"
    )


async def test_update_adds_metrics_and_set_metrics_replaces_them(
    shoal: Shoal, client: ShoalClient, tmp_path: Path
) -> None:
    path = write(tmp_path, kubeconfig("c2"))
    ok(await shoal("kube", "cluster", "register", "-k", path, "--global-metric", "price", "2"))

    async def metrics() -> set[tuple[str, float, bool]]:
        cluster = await client.get(Cluster, "c2", "default")
        return {(m.name, m.weight, m.namespaced) for m in cluster.spec.metrics}

    ok(await shoal("kube", "cluster", "update", "c2", "--global-metric", "green", "1"))
    assert await metrics() == {("price", 2.0, False), ("green", 1.0, False)}
    ok(await shoal("kube", "cluster", "update", "c2", "--global-metric", "price", "5",
                   "--metric", "load", "1"))  # fmt: skip
    assert await metrics() == {("price", 5.0, False), ("green", 1.0, False), ("load", 1.0, True)}
    ok(await shoal("kube", "cluster", "update", "c2", "--set-metrics", "--metric", "load", "3"))
    assert await metrics() == {("load", 3.0, True)}
    ok(await shoal("kube", "cluster", "update", "c2", "--set-metrics"))
    assert await metrics() == set()
