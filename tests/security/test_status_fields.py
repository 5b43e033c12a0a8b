"""What a tenant writes into status never steers the kube controller onto another's cluster.

alice (namespace a) attacks bob (namespace b) on a secured API that gives every new
application the kube controller's finalizer, as ``shoal up`` does, with two ``shoal sim``
member clusters (alice's and bob's) and the real kube controller, logged in as
``system:kube-controller``. Each attack is checked on bob's member cluster itself.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.api.server import ApiServer, start_api
from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import ShoalClient
from shoal.copies.owners import LABEL_UID, Owner
from shoal.kube.controller import KubeController
from shoal.model.kubernetes import Cluster
from shoal.testing.builders import deployment
from shoal.testing.sim import running_sim
from shoal.testing.wait import wait_for
from tests.security.conftest import TOKENS, binding, role, security, tenant_role, token_file

pytestmark = pytest.mark.integration

APPS = "/kubernetes/namespaces/{ns}/applications"
KRAKE_TOKEN = "krake-controller-token"  # a controller run under a name of its own


def ref(namespace: str, name: str) -> dict[str, Any]:
    return {"api": "kubernetes", "kind": "Cluster", "namespace": namespace, "name": name}


def configmap(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


NAMESPACE_OBJ = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bob-private"}}


def app(name: str, namespace: str, manifest: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"manifest": manifest, **spec},
    }


@dataclass
class World:
    server: ApiServer
    http: dict[str, httpx.AsyncClient]
    alices: KubeCluster  # the member clusters, read and written directly
    bobs: KubeCluster
    controller: KubeController
    kubeconfigs: dict[str, dict[str, Any]]  # each tenant's member cluster's, by tenant

    async def status(self, user: str, name: str, namespace: str) -> dict[str, Any]:
        answer = await self.http[user].get(f"{APPS.format(ns=namespace)}/{name}")
        assert answer.status_code == 200, answer.text
        status: dict[str, Any] = answer.json()["status"]
        return status

    async def events(self, user: str, namespace: str, name: str) -> list[dict[str, Any]]:
        answer = await self.http[user].get(f"/core/namespaces/{namespace}/events")
        assert answer.status_code == 200, answer.text
        items: list[dict[str, Any]] = answer.json()["items"]
        return [e for e in items if e["involved_object"]["name"] == name]

    async def gone(self, user: str, name: str, namespace: str) -> bool:
        answer = await self.http[user].get(f"{APPS.format(ns=namespace)}/{name}")
        return answer.status_code == 404

    async def bound(
        self, user: str, namespace: str, name: str, manifest: list[dict[str, Any]],
        cluster: str, **spec: Any,
    ) -> None:
        """``user`` makes application ``name`` of ``manifest`` (and ``spec``) in
        ``namespace`` and binds it to the cluster ``cluster`` there: both accepted."""
        http, body = self.http[user], app(name, namespace, manifest, **spec)
        answer = await http.post(APPS.format(ns=namespace), json=body)
        assert answer.status_code == 200, answer.text
        bind = {"cluster": ref(namespace, cluster)}
        answer = await http.put(f"{APPS.format(ns=namespace)}/{name}/binding", json=bind)
        assert answer.status_code == 200, answer.text

    async def running(self, user: str, name: str, namespace: str) -> None:
        """Waits until ``user`` sees application ``name`` RUNNING."""

        async def running() -> bool:
            return (await self.status(user, name, namespace))["state"] == "RUNNING"

        await wait_for(running, timeout=30, message=f"{user}'s application RUNNING")

    async def conflict(
        self, user: str, name: str, namespace: str, timeout: float = 15, message: str = "CONFLICT"
    ) -> str:
        """The message of the CONFLICT ``user`` sees as application ``name``'s deploy reason,
        once it is there."""

        async def conflict() -> str | None:
            reason = (await self.status(user, name, namespace)).get("deploy_reason") or {}
            return reason.get("message") if reason.get("code") == "CONFLICT" else None

        return await wait_for(conflict, timeout=timeout, message=message)


def in_namespace(kubeconfig: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``kubeconfig`` whose context puts objects without a namespace into ``namespace``."""
    config = copy.deepcopy(kubeconfig)
    config["contexts"][0]["context"]["namespace"] = namespace
    return config


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    tokens = token_file(tmp_path / "tokens-and-krake.csv")
    with tokens.open("a") as out:
        out.write(f'{KRAKE_TOKEN},krake,krake,"shoal:controllers"\n')
    server = await start_api(
        f"sqlite://{tmp_path / 'shoal.db'}",
        security=security(tmp_path, token_file=tokens),
        kube_finalizer=True,
    )
    http = {
        user: httpx.AsyncClient(
            base_url=server.url, headers={"authorization": f"Bearer {token}"}, timeout=30
        )
        for user, token in {**TOKENS, "krake": KRAKE_TOKEN}.items()
    }
    kube_clients = KubeClients(timeout=5.0)
    client = ShoalClient(server.url, token=TOKENS["system:kube-controller"])
    admin = http["admin"]
    async with running_sim(clusters=["alice-1", "bob-1"], nodes=2, pod_start_delay=0.1) as sim:
        for namespace, user in (("a", "alice"), ("b", "bob")):
            assert (await admin.post("/core/roles", json=tenant_role(namespace))).is_success
            body = binding(f"tenant-{namespace}", [user], [f"tenant-{namespace}"])
            assert (await admin.post("/core/rolebindings", json=body)).is_success

        async def bound() -> bool:
            answer = await http["bob"].get(APPS.format(ns="b"))
            return answer.status_code == 200

        # Krake's controllers: every right, as its always-allow API gave them
        controllers = role("krake-controllers")
        assert (await admin.post("/core/roles", json=controllers)).is_success
        body = binding("krake-controllers", ["group:shoal:controllers"], ["krake-controllers"])
        assert (await admin.post("/core/rolebindings", json=body)).is_success

        async def krake_bound() -> bool:
            answer = await http["krake"].get(APPS.format(ns="a"))
            return answer.status_code == 200

        await wait_for(bound, timeout=10, message="tenants' roles")
        await wait_for(krake_bound, timeout=10, message="the controllers' role")
        members = {}
        kubeconfigs = {}
        for user, namespace, member in (("alice", "a", "alice-1"), ("bob", "b", "bob-1")):
            # each tenant's credentials default to a Kubernetes namespace of its own, where
            # the objects of its manifests that name none go
            kubeconfig = in_namespace(sim.kubeconfig(member), namespace)
            cluster = {
                "api": "kubernetes",
                "kind": "Cluster",
                "metadata": {"name": f"cluster-{namespace}", "namespace": namespace},
                "spec": {"kubeconfig": copy.deepcopy(kubeconfig), "metrics": []},
            }
            path = f"/kubernetes/namespaces/{namespace}/clusters"
            answer = await http[user].post(path, json=cluster)
            assert answer.status_code == 200, answer.text
            members[user] = await kube_clients.get(Cluster.model_validate(cluster))
            kubeconfigs[user] = copy.deepcopy(kubeconfig)
        controller = KubeController(client, poll_interval=0.2, resync=60.0, timeout=5.0)
        await controller.start()
        try:
            yield World(server, http, members["alice"], members["bob"], controller, kubeconfigs)
        finally:
            await controller.stop()
            await client.close()
            await kube_clients.close()
            for one in http.values():
                await one.aclose()
            await server.stop()


async def bobs_web(world: World) -> dict[str, Any]:
    """bob's application ``web`` RUNNING on his cluster: its live Deployment there."""
    await world.bound("bob", "b", "web", [deployment("web", "bob:1")], "cluster-b")
    await world.running("bob", "web", "b")
    live = await world.bobs.read(deployment("web", "bob:1"), "b")
    assert live is not None
    return live


def image(live: dict[str, Any] | None) -> str:
    assert live is not None
    return str(live["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_a_tenant_writes_no_field_that_steers_a_controller(world: World) -> None:
    """Attack 1: alice's status names bob's cluster; bob's Deployment stays his."""
    before = await bobs_web(world)
    alice = world.http["alice"]
    manifest = [deployment("web", "evil:1")]
    answer = await alice.post(
        APPS.format(ns="a"), json=app("web", "a", manifest, conflict_resolution="overwrite")
    )
    assert answer.status_code == 200, answer.text
    steer = {
        "scheduled_to": ref("b", "cluster-b"),
        "placements": [{"cluster": ref("b", "cluster-b"), "replicas": 1}],
        "kube_controller_triggered": "2099-01-01T00:00:00Z",
    }
    path = f"{APPS.format(ns='a')}/web/status"

    # the field patch, one field at a time and all at once
    for field, value in steer.items():
        answer = await alice.patch(path, json={"status": {field: value}})
        assert answer.status_code == 403, answer.text
        assert f"status.{field}" in answer.json()["detail"]
    answer = await alice.patch(path, json={"status": steer})
    assert answer.status_code == 403, answer.text
    fields = {e["field"] for e in answer.json()["errors"]}
    assert fields == {f"status.{f}" for f in steer}

    # the batch route, item by item
    items = [{"namespace": "a", "name": "web", "status": steer}]
    answer = await alice.post("/scheduling/applicationstatuses", json={"items": items})
    assert answer.status_code == 200, answer.text
    (result,) = answer.json()["results"]
    assert result["status"] == 403 and "status.kube_controller_triggered" in result["detail"]

    # Krake's whole-object status write
    body = (await alice.get(f"{APPS.format(ns='a')}/web")).json()
    body["status"].update(steer)
    answer = await alice.put(path, json=body)
    assert answer.status_code == 403, answer.text
    assert "status.kube_controller_triggered" in answer.json()["detail"]

    # the object's own PUT and a create carry a status that is never written
    answer = await alice.put(f"{APPS.format(ns='a')}/web", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"].get("placements", []) == []
    answer = await alice.post(APPS.format(ns="a"), json={**app("web2", "a", manifest),
                                                         "status": steer})  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"]["scheduled_to"] is None

    stored = await world.status("alice", "web", "a")
    assert stored["scheduled_to"] is None and stored.get("placements", []) == []
    assert stored["kube_controller_triggered"] is None

    # Were it written some other way (an administrator's write), the controller still does
    # nothing on a cluster outside the application's namespace.
    answer = await world.http["admin"].patch(path, json={"status": steer})
    assert answer.status_code == 200, answer.text

    async def refused() -> str | None:
        reason = (await world.status("alice", "web", "a")).get("deploy_reason") or {}
        message = reason.get("message") or ""
        return message if "outside the application's namespace" in message else None

    message = await wait_for(refused, timeout=15, message="alice's application refused")
    assert "bob" not in message and "'b'" not in message
    # the same on one cluster, without placements
    answer = await alice.post(
        APPS.format(ns="a"), json=app("single", "a", manifest, conflict_resolution="overwrite")
    )
    assert answer.status_code == 200, answer.text
    one = {k: v for k, v in steer.items() if k != "placements"}
    answer = await world.http["admin"].patch(
        f"{APPS.format(ns='a')}/single/status", json={"status": one}
    )
    assert answer.status_code == 200, answer.text

    async def single_refused() -> bool:
        reason = (await world.status("alice", "single", "a")).get("deploy_reason") or {}
        return "outside the application's namespace" in (reason.get("message") or "")

    await wait_for(single_refused, timeout=15, message="the single-cluster one refused")
    live = await world.bobs.read(deployment("web", "bob:1"), "b")
    assert image(live) == "bob:1"
    assert live is not None and live["metadata"]["uid"] == before["metadata"]["uid"]
    assert live["metadata"]["labels"][LABEL_UID] == before["metadata"]["labels"][LABEL_UID]
    events = await wait_for(lambda: world.events("alice", "a", "web"), timeout=15,
                            message="alice's events")  # fmt: skip
    assert not [e for e in events if e["reason"] == "TookOver"]
    bobs_uid = before["metadata"]["labels"][LABEL_UID]
    assert all(bobs_uid not in e["message"] and "cluster-b" not in e["message"]
               for e in events)  # fmt: skip


async def test_a_controller_group_writes_the_controllers_fields(world: World) -> None:
    """A controller under a name of its own (Krake's) is a member of shoal:controllers."""
    answer = await world.http["krake"].post(
        APPS.format(ns="a"), json=app("k", "a", [configmap("k")])
    )
    assert answer.status_code == 200, answer.text
    path = f"{APPS.format(ns='a')}/k/status"
    running = {"running_on": ref("a", "cluster-a"), "deploy_state": "RUNNING"}
    answer = await world.http["krake"].patch(path, json={"status": running})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    body["status"]["state"] = "FAILED"
    answer = await world.http["krake"].put(path, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"]["state"] == "FAILED"
    # a tenant's whole-status write that changes nothing of the controllers' passes
    body = (await world.http["alice"].get(f"{APPS.format(ns='a')}/k")).json()
    assert (await world.http["alice"].put(path, json=body)).status_code == 200
    # a component still writes only its own fields
    token = {"authorization": f"Bearer {TOKENS['system:kube-controller']}"}
    kube = httpx.AsyncClient(base_url=world.server.url, timeout=30, headers=token)
    async with kube:
        answer = await kube.patch(path, json={"status": {"scheduled_to": ref("a", "x")}})
    assert answer.status_code == 403, answer.text


async def test_a_tenant_cannot_steer_a_cluster_build(world: World) -> None:
    """A cluster's status (its cloud, its build) is its components'."""
    path = "/kubernetes/namespaces/a/clusters/cluster-a/status"
    cloud = {"api": "infrastructure", "kind": "Cloud", "namespace": "b", "name": "bobs"}
    answer = await world.http["alice"].patch(path, json={"status": {"scheduled_to": cloud}})
    assert answer.status_code == 403, answer.text
    assert "status.scheduled_to" in answer.json()["detail"]
    body = (await world.http["alice"].get(path.removesuffix("/status"))).json()
    body["status"]["running_on"] = cloud
    answer = await world.http["alice"].put(path, json=body)
    assert answer.status_code == 403, answer.text


async def test_status_never_makes_the_controller_delete_what_it_did_not_make(
    world: World,
) -> None:
    """Attack 2: alice's clean-ups, copies or running_on name bob's objects; they stay."""
    bobs = world.bobs
    await bobs.ensure_namespace("b")
    notes = await bobs.apply(configmap("notes"), "b")  # made by hand: no owner
    private = await bobs.apply(NAMESPACE_OBJ, "b")
    alice = world.http["alice"]
    answer = await alice.post(APPS.format(ns="a"), json=app("thief", "a", [configmap("notes")]))
    assert answer.status_code == 200, answer.text
    objects = [configmap("notes", "b"), NAMESPACE_OBJ]
    cluster = ref("b", "cluster-b")
    writes = {
        "pending_cleanups": [{"cluster": cluster, "objects": objects}],
        "copies": [{"cluster": cluster, "replicas": 1}],
        "running_on": cluster,
        "last_applied_manifest": objects,
    }
    path = f"{APPS.format(ns='a')}/thief/status"
    for field, value in writes.items():
        answer = await alice.patch(path, json={"status": {field: value}})
        assert answer.status_code == 403, answer.text
        assert f"status.{field}" in answer.json()["detail"]
        items = [{"namespace": "a", "name": "thief", "status": {field: value}}]
        answer = await alice.post("/scheduling/applicationstatuses", json={"items": items})
        assert [r["status"] for r in answer.json()["results"]] == [403]

    # written some other way, the controller still deletes nothing there
    answer = await world.http["admin"].patch(path, json={"status": writes})
    assert answer.status_code == 200, answer.text

    async def cleaned() -> bool:
        return not (await world.status("alice", "thief", "a")).get("pending_cleanups")

    await wait_for(cleaned, timeout=15, message="the foreign clean-up dropped")
    assert (await alice.delete(f"{APPS.format(ns='a')}/thief")).status_code == 200
    await wait_for(lambda: world.gone("alice", "thief", "a"), timeout=15,
                   message="alice's application deleted")  # fmt: skip
    kept = await bobs.read(configmap("notes"), "b")
    assert kept is not None and kept["metadata"]["uid"] == notes["metadata"]["uid"]
    kept = await bobs.read(NAMESPACE_OBJ, "b")
    assert kept is not None and kept["metadata"]["uid"] == private["metadata"]["uid"]


async def test_an_unlabelled_object_is_never_an_applications(world: World) -> None:
    """On its own cluster too, an application deletes only what carries its owner label."""
    alices = world.alices
    await alices.ensure_namespace("a")
    by_hand = await alices.apply(configmap("by-hand"), "a")
    alice = world.http["alice"]
    await world.bound("alice", "a", "mine", [configmap("cfg")], "cluster-a")
    await world.running("alice", "mine", "a")
    # its status made to list the object made by hand as a copy left behind there (an
    # administrator's write): the clean-up leaves it, and so does the deletion
    left = [{"cluster": ref("a", "cluster-a"), "objects": [configmap("by-hand", "a")]}]
    path = f"{APPS.format(ns='a')}/mine/status"
    answer = await world.http["admin"].patch(path, json={"status": {"pending_cleanups": left}})
    assert answer.status_code == 200, answer.text

    async def cleaned() -> bool:
        return not (await world.status("alice", "mine", "a")).get("pending_cleanups")

    await wait_for(cleaned, timeout=15, message="the clean-up done")
    kept = await alices.read(configmap("by-hand"), "a")
    assert kept is not None and kept["metadata"]["uid"] == by_hand["metadata"]["uid"]
    assert (await alice.delete(f"{APPS.format(ns='a')}/mine")).status_code == 200
    await wait_for(lambda: world.gone("alice", "mine", "a"), timeout=15,
                   message="alice's application deleted")  # fmt: skip
    assert await alices.read(configmap("cfg"), "a") is None  # its own: deleted
    kept = await alices.read(configmap("by-hand"), "a")
    assert kept is not None and kept["metadata"]["uid"] == by_hand["metadata"]["uid"]


async def test_events_name_no_application_of_another_namespace(world: World) -> None:
    """Attack 14: an object on alice's cluster labelled as bob's application: refusing it,
    even to ``overwrite``, tells alice nothing of bob's application, nor whether it exists."""
    live = await bobs_web(world)
    bobs_uid = live["metadata"]["labels"][LABEL_UID]
    forged = configmap("shared")
    forged["metadata"]["labels"] = Owner("b", "web", bobs_uid).labels
    alices = world.alices
    await alices.ensure_namespace("a")
    await alices.apply(forged, "a")
    alice = world.http["alice"]

    await world.bound("alice", "a", "careful", [configmap("shared")], "cluster-a")
    bind = {"cluster": ref("a", "cluster-a")}
    message = await world.conflict("alice", "careful", "a")
    assert "another namespace" in message and bobs_uid not in message and "b/web" not in message
    assert (await alice.delete(f"{APPS.format(ns='a')}/careful")).status_code == 200
    await wait_for(lambda: world.gone("alice", "careful", "a"), timeout=15,
                   message="careful deleted")  # fmt: skip

    # overwrite takes no object of another namespace's application (on a cluster two
    # tenants reach, the other's), and says nothing of it either
    taker = app("taker", "a", [configmap("shared")], conflict_resolution="overwrite")
    assert (await alice.post(APPS.format(ns="a"), json=taker)).status_code == 200
    answer = await alice.put(f"{APPS.format(ns='a')}/taker/binding", json=bind)
    assert answer.status_code == 200, answer.text

    async def refused() -> str | None:
        reason = (await world.status("alice", "taker", "a")).get("deploy_reason") or {}
        return reason.get("message") if reason.get("code") == "CONFLICT" else None

    message = await wait_for(refused, timeout=30, message="overwrite refused")
    assert "another namespace" in message
    assert bobs_uid not in message and "b/web" not in message
    events = await wait_for(lambda: world.events("alice", "a", "taker"), timeout=15,
                            message="alice's events")  # fmt: skip
    assert not [e for e in events if e["reason"] == "TookOver"]
    for event in events:
        assert bobs_uid not in event["message"] and "b/web" not in event["message"]
    kept = await alices.read(configmap("shared"), "a")
    assert kept is not None and kept["metadata"]["labels"][LABEL_UID] == bobs_uid


async def test_without_rbac_users_are_not_told_apart_but_components_are(tmp_path: Path) -> None:
    """Krake's ``always-allow`` (and its ``static`` user): every request is allowed, so any
    user writes any field; a component still keeps to its own."""
    server = await start_api(
        f"sqlite://{tmp_path / 'shoal.db'}",
        security=security(tmp_path, authorization="always-allow"),
    )

    def as_user(user: str) -> httpx.AsyncClient:
        token = {"authorization": f"Bearer {TOKENS[user]}"}
        return httpx.AsyncClient(base_url=server.url, headers=token, timeout=30)

    try:
        async with as_user("alice") as alice, as_user("system:kube-controller") as kube:
            answer = await alice.post(APPS.format(ns="a"), json=app("x", "a", [configmap("x")]))
            assert answer.status_code == 200, answer.text
            path = f"{APPS.format(ns='a')}/x/status"
            answer = await alice.patch(path, json={"status": {"running_on": ref("a", "c")}})
            assert answer.status_code == 200, answer.text
            answer = await kube.patch(path, json={"status": {"scheduled_to": ref("a", "c")}})
            assert answer.status_code == 403, answer.text
    finally:
        await server.stop()
