"""Where each kind keeps its secrets and where it sends them, found in its model; how a
value is found, redacted and spelled by its concrete path; and where the keys come from.

These are the paths the API seals at rest, redacts for readers without the ``secrets``
verb, and holds still when a write keeps a secret by its placeholder.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from shoal.api.auth.secrets import (
    REDACTED,
    concrete,
    destination_paths,
    destinations_of_key,
    kinds_with_secrets,
    leaves,
    load_cipher,
    new_key,
    paths_of_key,
    paths_of_resource,
    redact,
    secret_paths,
)

KUBECONFIG_USERS = ("spec", "kubeconfig", "users", "*", "user", "*")
IM = (("spec", "im", "password"), ("spec", "im", "token"),
      ("spec", "im", "clouds", "*", "password"), ("spec", "im", "clouds", "*", "token"),
      ("spec", "sim", "token"))  # fmt: skip
INFLUX = (("spec", "influx", "token"), ("spec", "influx", "password"))
CLOUD = (("spec", "openstack", "auth", "password", "user", "password"),)

# kind -> (its secrets, where they are sent)
KINDS = {
    "Cluster": ((KUBECONFIG_USERS,), (("spec", "kubeconfig", "clusters"),
                                       ("spec", "kubeconfig", "contexts"),
                                       ("spec", "kubeconfig", "current-context"))),
    "GlobalMetricsProvider": (INFLUX, (("spec", "influx", "url"),)),
    "MetricsProvider": (INFLUX, (("spec", "influx", "url"),)),
    "GlobalCloud": (CLOUD, (("spec", "openstack", "url"),
                            ("spec", "openstack", "infrastructure_provider"))),
    "Cloud": (CLOUD, (("spec", "openstack", "url"),
                      ("spec", "openstack", "infrastructure_provider"))),
    "GlobalInfrastructureProvider": (IM, (("spec", "im", "url"), ("spec", "im", "clouds", "*",
                                                                  "host"), ("spec", "sim", "url"))),
    "InfrastructureProvider": (IM, (("spec", "im", "url"), ("spec", "im", "clouds", "*", "host"),
                                    ("spec", "sim", "url"))),
}  # fmt: skip


def test_every_kind_with_secrets_and_where_it_keeps_and_sends_them() -> None:
    found = {kind.__name__: (secret_paths(kind), destination_paths(kind))
             for kind in kinds_with_secrets()}  # fmt: skip
    assert found == KINDS


@pytest.mark.parametrize(
    ("api", "plural", "want"),
    [
        ("kubernetes", "clusters", (KUBECONFIG_USERS,)),
        ("core", "metricsproviders", INFLUX),
        ("kubernetes", "applications", None),  # a kind without secrets
        ("core", "roles", None),
        ("kubernetes", "nothing", None),  # no such kind
    ],
)
def test_the_secrets_of_a_resource(api: str, plural: str, want: Any) -> None:
    assert paths_of_resource(api, plural) == want


def test_the_secrets_and_destinations_of_a_store_key() -> None:
    assert paths_of_key("/kubernetes/clusters/b/c1") == (KUBECONFIG_USERS,)
    assert paths_of_key("/kubernetes/clusters/") == (KUBECONFIG_USERS,)  # a prefix of the kind
    assert paths_of_key("/kubernetes/applications/b/x") is None
    assert paths_of_key("/kubernetes") is None
    assert paths_of_key("clusters") is None
    assert destinations_of_key("/infrastructure/clouds/b/os") == KINDS["Cloud"][1]
    assert destinations_of_key("/kubernetes/applications/b/x") == ()
    assert destinations_of_key("/kubernetes") == ()


KUBECONFIG: dict[str, Any] = {"spec": {"kubeconfig": {
    "clusters": [{"name": "c", "cluster": {"server": "https://c"}}],
    "users": [
        {"name": "u1", "user": {"token": "t1", "password": None}},
        {"name": "u2", "user": {"username": "alice", "password": "p2"}},
        {"name": "u3"},  # no credential
        "not a mapping",
    ],
}}}  # fmt: skip


def test_leaves_are_the_present_values() -> None:
    data = copy.deepcopy(KUBECONFIG)
    found = [(container[key], key) for container, key in leaves(data, (KUBECONFIG_USERS,))]
    assert found == [("t1", "token"), ("alice", "username"), ("p2", "password")]
    assert list(leaves(data, (("spec", "nothing", "token"),))) == []
    assert list(leaves(data, ((),))) == []
    assert list(leaves({"spec": {"influx": {"token": None}}}, INFLUX)) == []


def test_redact_replaces_only_what_is_there() -> None:
    data = copy.deepcopy(KUBECONFIG)
    redact(data, (KUBECONFIG_USERS,))
    users = data["spec"]["kubeconfig"]["users"]
    assert users[0]["user"] == {"token": REDACTED, "password": None}
    assert users[1]["user"] == {"username": REDACTED, "password": REDACTED}
    assert users[2] == {"name": "u3"} and users[3] == "not a mapping"
    assert data["spec"]["kubeconfig"]["clusters"] == KUBECONFIG["spec"]["kubeconfig"]["clusters"]


def test_concrete_paths_spell_out_indices_and_keys() -> None:
    assert concrete(copy.deepcopy(KUBECONFIG), (KUBECONFIG_USERS,)) == {
        ("spec", "kubeconfig", "users", 0, "user", "token"): "t1",
        ("spec", "kubeconfig", "users", 0, "user", "password"): None,
        ("spec", "kubeconfig", "users", 1, "user", "username"): "alice",
        ("spec", "kubeconfig", "users", 1, "user", "password"): "p2",
    }
    provider = {"spec": {"influx": {"token": "t", "password": None}}}
    assert concrete(provider, INFLUX) == {("spec", "influx", "token"): "t"}
    assert concrete({"spec": []}, INFLUX) == {}


def test_keys_come_from_the_file_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = new_key(), new_key()
    assert len(base64.b64decode(first)) == 32 and first != second
    key_file = tmp_path / "secrets.key"
    key_file.write_text(f"\n{first}\n  \n{second}\n")
    monkeypatch.setenv("SHOAL_TEST_KEYS", f"{second},{first}")
    from_file = load_cipher(key_file, "SHOAL_TEST_KEYS")
    from_env = load_cipher(None, "SHOAL_TEST_KEYS")
    assert from_file is not None and from_env is not None
    assert from_file.ids == list(reversed(from_env.ids)) and len(from_file.ids) == 2
    sealed = from_file.encrypt("v", b"k")
    assert from_file.key_id(sealed) == from_file.current == from_env.ids[1]
    assert from_env.decrypt(sealed, b"k") == "v"  # the second key of the ring opens it
    assert load_cipher(None, None) is None
    assert load_cipher(None, "SHOAL_TEST_UNSET") is None
    monkeypatch.setenv("SHOAL_TEST_EMPTY", "")
    assert load_cipher(None, "SHOAL_TEST_EMPTY") is None
