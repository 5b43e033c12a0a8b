"""The create rules alone (no API): kubeconfig resolution, schema versions and the off switch."""

from __future__ import annotations

import pytest

from shoal.model.validation import schemas
from shoal.model.validation.kubeconfig import check_kubeconfig
from shoal.testing.builders import kubeconfig

REPLICAS = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": "three", "selector": {}, "template": {}}}  # fmt: skip


def fields(config: object) -> list[tuple[str, bool]]:
    return [(f.field, f.warning) for f in check_kubeconfig(config, "k")]


def test_a_kubeconfig_resolves_as_the_kubernetes_client_loads_it() -> None:
    assert fields(kubeconfig("a")) == []
    several = kubeconfig("a")
    several["contexts"].append({"name": "b", "context": {"cluster": "a", "user": "a-user"}})
    assert fields(several) == [("k.contexts", True)]
    del several["current-context"]
    assert fields(several) == [("k.current-context", False)]
    only = kubeconfig("a")
    del only["current-context"]
    assert fields(only) == []  # the only context
    twice = kubeconfig("a")
    twice["users"].append(dict(twice["users"][0]))
    assert fields(twice) == [("k.users[1].name", False)]
    cert = kubeconfig("a")
    cert["users"][0]["user"] = {"client-certificate-data": "x"}  # the key is missing
    assert fields(cert) == [("k.users[0].user", False)]
    port = kubeconfig("a", "https://h:port")
    assert fields(port) == [("k.clusters[0].cluster.server", False)]


def test_schema_version_and_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    if not schemas.versions():
        pytest.skip("the schemas extra is not installed")
    assert schemas.version() == schemas.versions()[-1]
    oldest = schemas.versions()[0]
    monkeypatch.setenv(schemas.ENV_VERSION, f"v{oldest}.3")
    assert schemas.version() == oldest
    assert [f.field for f in schemas.check(REPLICAS, "m")] == ["m.spec.replicas"]
    monkeypatch.setenv(schemas.ENV_VERSION, "1.2")
    assert "no manifest schemas" in schemas.status()
    assert list(schemas.check(REPLICAS, "m")) == []
    monkeypatch.delenv(schemas.ENV_VERSION)
    monkeypatch.setenv(schemas.ENV_SWITCH, "off")
    assert schemas.version() is None and list(schemas.check(REPLICAS, "m")) == []
    assert "off" in schemas.status()
