"""Credentials a tenant gives are data: never a command or a file read on Shoal's hosts, and
never sent somewhere new by a writer who never saw them."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoal.api.auth.secrets import REDACTED, destination_paths, kinds_with_secrets
from shoal.client.kube import api_client
from shoal.model.validation.kubeconfig import CredentialPolicy, set_credential_policy
from tests.security.conftest import (
    Secured,
    cluster,
    eventually,
    grant,
    role,
    secured_admin,
)

SECRET = "tenant-bearer-token"


@pytest.fixture(autouse=True)
def _environment_policy() -> Iterator[None]:
    """Each test ends with the process's policy read from the environment again."""
    yield
    set_credential_policy(None)


def _exec_script(tmp_path: Path) -> tuple[Path, Path]:
    """A real exec plugin: writes the environment it got to a file, prints a credential."""
    seen = tmp_path / "plugin-environment.json"
    script = tmp_path / "plugin.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-the-plugin"},
    }
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        f"print(json.dumps({credential!r}))\n"
    )
    script.chmod(0o755)
    return script, seen


def _with_user(body: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    body["spec"]["kubeconfig"]["users"][0]["user"] = user
    return body


REFUSED = [
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
               "args": ["-c", "id > /tmp/x"]}}, "users[0].user.exec"),
    ({"tokenFile": "/etc/shadow"}, "users[0].user.tokenFile"),
    ({"auth-provider": {"name": "gcp", "config": {"cmd-path": "sh"}}},
     "users[0].user.auth-provider"),
    ({"client-certificate": "/etc/ssl/private/a.crt", "client-key": "/etc/ssl/private/a.key"},
     "users[0].user.client-certificate"),
]  # fmt: skip


@pytest.mark.parametrize(("user", "field"), REFUSED)
async def test_credentials_that_act_on_our_hosts_are_refused(
    secured: Secured, tmp_path: Path, user: dict[str, Any], field: str
) -> None:
    body = _with_user(cluster("c1", "a"), user)
    answer = await secured["alice"].post("/kubernetes/namespaces/a/clusters", json=body)
    assert answer.status_code == 422, answer.text
    fields = [e["field"] for e in answer.json()["errors"]]
    assert f"spec.kubeconfig.{field}" in fields
    missing = await secured["alice"].get("/kubernetes/namespaces/a/clusters/c1")
    assert missing.status_code == 404


async def test_a_file_path_for_the_server_ca_is_refused(secured: Secured) -> None:
    body = cluster("c1", "a")
    body["spec"]["kubeconfig"]["clusters"][0]["cluster"]["certificate-authority"] = "/etc/x"
    answer = await secured["alice"].post("/kubernetes/namespaces/a/clusters", json=body)
    assert answer.status_code == 422, answer.text
    assert "clusters[0].cluster.certificate-authority" in answer.json()["errors"][0]["field"]


async def test_the_controllers_refuse_a_stored_exec_credential_without_running_it(
    tmp_path: Path,
) -> None:
    """Defence in depth: a kubeconfig that reached the store anyway is never run."""
    script, seen = _exec_script(tmp_path)
    kubeconfig = _with_user(cluster("c1", "a"), {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}})
    with pytest.raises(ValueError, match="exec"):
        await api_client(kubeconfig["spec"]["kubeconfig"])
    assert not seen.exists()


async def test_an_allowed_exec_command_runs_without_shoals_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, seen = _exec_script(tmp_path)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script),
                     "env": [{"name": "REGION", "value": "eu"}]}}  # fmt: skip
    allowed = CredentialPolicy(exec_commands=frozenset({str(script)}))
    async with secured_admin(tmp_path, kubeconfig=allowed) as (_, admin):
        body = _with_user(cluster("c1", "a"), user)
        answer = await admin.post("/kubernetes/namespaces/a/clusters", json=body)
        assert answer.status_code == 200, answer.text
        other = _with_user(cluster("c2", "a"), {"exec": {**user["exec"], "command": "sh"}})
        answer = await admin.post("/kubernetes/namespaces/a/clusters", json=other)
        assert answer.status_code == 422, answer.text
    monkeypatch.setenv("SHOAL_TOKEN", "a-component-token")
    monkeypatch.setenv("SHOAL_SECRETS_KEY", "a-key")
    set_credential_policy(allowed)
    api = await api_client(body["spec"]["kubeconfig"])
    await api.close()
    environment = json.loads(seen.read_text())
    assert environment["REGION"] == "eu"
    assert not [name for name in environment if name.startswith("SHOAL_")]


def test_every_kind_with_secrets_knows_where_they_are_sent() -> None:
    for kind in kinds_with_secrets():
        assert destination_paths(kind), kind.__name__


async def _editor_without_secrets(secured: Secured, resource: str) -> None:
    verbs = ("get", "list", "list_all", "watch", "update")
    await grant(
        secured["admin"], "alice", role(f"{resource}-editor-b", "*", (resource,), ("b",), verbs)
    )

    async def readable() -> bool:
        answer = await secured["alice"].get(f"/{_api(resource)}/namespaces/b/{resource}")
        return answer.status_code == 200

    await eventually(readable)


def _api(resource: str) -> str:
    return "kubernetes" if resource == "clusters" else "core"


async def test_a_kept_token_is_not_sent_to_a_new_server(secured: Secured) -> None:
    bob, alice, kube = secured["bob"], secured["alice"], secured["system:kube-controller"]
    path = "/kubernetes/namespaces/b/clusters/c1"
    await bob.post("/kubernetes/namespaces/b/clusters", json=cluster("c1", "b", SECRET))
    await _editor_without_secrets(secured, "clusters")
    listener = "https://127.0.0.1:9/alice-listens-here"

    body = (await alice.get(path)).json()
    assert body["spec"]["kubeconfig"]["users"][0]["user"]["token"] == REDACTED
    body["spec"]["kubeconfig"]["clusters"][0]["cluster"]["server"] = listener
    answer = await alice.put(path, json=body)
    assert answer.status_code == 403, answer.text
    assert "spec.kubeconfig.clusters" in answer.json()["detail"]
    stored = (await kube.get(path)).json()["spec"]["kubeconfig"]
    assert stored["clusters"][0]["cluster"]["server"] != listener
    assert stored["users"][0]["user"]["token"] == SECRET

    # A new context pointing the user at another cluster entry is a new destination too.
    body = (await alice.get(path)).json()
    kubeconfig = body["spec"]["kubeconfig"]
    kubeconfig["clusters"].append({"name": "mine", "cluster": {"server": listener}})
    kubeconfig["contexts"][0]["context"]["cluster"] = "mine"
    assert (await alice.put(path, json=body)).status_code == 403

    # The secret given again (not the placeholder) may go anywhere: the writer knows it.
    body = (await alice.get(path)).json()
    body["spec"]["kubeconfig"]["clusters"][0]["cluster"]["server"] = listener
    body["spec"]["kubeconfig"]["users"][0]["user"]["token"] = "alices-own-token"
    assert (await alice.put(path, json=body)).status_code == 200
    stored = (await kube.get(path)).json()["spec"]["kubeconfig"]
    assert stored["users"][0]["user"]["token"] == "alices-own-token"


async def test_a_writer_with_the_secrets_verb_may_move_a_kept_secret(secured: Secured) -> None:
    admin, kube = secured["admin"], secured["system:kube-controller"]
    path = "/kubernetes/namespaces/b/clusters/c1"
    await secured["bob"].post("/kubernetes/namespaces/b/clusters", json=cluster("c1", "b", SECRET))
    body = (await admin.get(path)).json()
    body["spec"]["kubeconfig"]["users"][0]["user"]["token"] = REDACTED
    body["spec"]["kubeconfig"]["clusters"][0]["cluster"]["server"] = "https://10.1.2.3:6443"
    assert (await admin.put(path, json=body)).status_code == 200
    stored = (await kube.get(path)).json()["spec"]["kubeconfig"]
    assert stored["clusters"][0]["cluster"]["server"] == "https://10.1.2.3:6443"
    assert stored["users"][0]["user"]["token"] == SECRET


async def test_a_kept_provider_token_is_not_sent_to_a_new_url(secured: Secured) -> None:
    bob, alice, admin = secured["bob"], secured["alice"], secured["admin"]
    provider = {
        "api": "core",
        "kind": "MetricsProvider",
        "metadata": {"name": "influx", "namespace": "b"},
        "spec": {"type": "influx", "influx": {
            "url": "http://8.8.8.8:8086", "token": SECRET, "org": "o", "bucket": "b"}},
    }  # fmt: skip
    answer = await bob.post("/core/namespaces/b/metricsproviders", json=provider)
    assert answer.status_code == 200, answer.text
    await _editor_without_secrets(secured, "metricsproviders")
    path = "/core/namespaces/b/metricsproviders/influx"
    body = (await alice.get(path)).json()
    assert body["spec"]["influx"]["token"] == REDACTED
    body["spec"]["influx"]["url"] = "http://8.8.4.4:9/alice"
    answer = await alice.put(path, json=body)
    assert answer.status_code == 403, answer.text
    assert "spec.influx.url" in answer.text
    body["spec"]["influx"]["url"] = "http://8.8.8.8:8086"
    body["metadata"]["labels"] = {"team": "b"}
    assert (await alice.put(path, json=body)).status_code == 200  # same destination: kept
    stored = (await admin.get(path)).json()["spec"]["influx"]
    assert stored["token"] == SECRET and stored["url"] == "http://8.8.8.8:8086"
