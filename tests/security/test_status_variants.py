"""Other routes and forms by which alice (namespace a) could steer the kube controller onto
bob's (namespace b) member cluster, each checked on bob's member cluster itself.

The set-up is ``test_status_fields.py``'s: a secured API as ``shoal up`` ships it, two
``shoal sim`` member clusters and the real kube controller. Routes: the binding and its
batch, the status patch in the forms a careful attacker tries (case, ``null``, JSON patch,
duplicate keys), the batch create, a cluster name with a namespace prefix, and a cluster
both tenants can reach.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from shoal.copies.owners import LABEL_UID, Owner
from shoal.testing.builders import deployment
from shoal.testing.wait import wait_for
from tests.security.test_status_fields import (
    APPS,
    World,
    app,
    bobs_web,
    configmap,
    image,
    ref,
    world,
)

pytestmark = pytest.mark.integration
__all__ = ["world"]  # the fixture


async def untouched(world: World, before: dict[str, Any]) -> None:
    """bob's Deployment ``web`` is as he left it: the same object, his image, his owner."""
    live = await world.bobs.read(deployment("web", "bob:1"), "b")
    assert live is not None, "bob's Deployment was deleted"
    assert image(live) == "bob:1"
    assert live["metadata"]["uid"] == before["metadata"]["uid"]
    assert live["metadata"]["labels"][LABEL_UID] == before["metadata"]["labels"][LABEL_UID]


async def alices_web(world: World, name: str = "web") -> None:
    manifest = [deployment("web", "evil:1")]
    body = app(name, "a", manifest, conflict_resolution="overwrite")
    answer = await world.http["alice"].post(APPS.format(ns="a"), json=body)
    assert answer.status_code == 200, answer.text


async def test_a_binding_names_no_cluster_of_another_namespace(world: World) -> None:
    """The binding route and its batch: bob's cluster is refused however it is named."""
    before = await bobs_web(world)
    await alices_web(world)
    alice = world.http["alice"]
    path = f"{APPS.format(ns='a')}/web/binding"
    for cluster in (ref("b", "cluster-b"), {**ref("b", "cluster-b"), "namespace": None}):
        answer = await alice.put(path, json={"cluster": cluster})
        assert answer.status_code == 422, answer.text
        assert "cluster.namespace" in answer.text
    shares = {"cluster": ref("a", "cluster-a"),
              "placements": [{"cluster": ref("a", "cluster-a"), "replicas": 1},
                             {"cluster": ref("b", "cluster-b"), "replicas": 1}]}  # fmt: skip
    answer = await alice.put(path, json=shares)
    assert answer.status_code == 422, answer.text
    assert "placements[1].cluster.namespace" in answer.text
    # the batch: her own application onto bob's cluster, and bob's application at all
    items = [
        {"namespace": "a", "name": "web", "cluster": ref("b", "cluster-b")},
        {"namespace": "b", "name": "web", "cluster": ref("b", "cluster-b")},
    ]
    answer = await alice.post("/scheduling/bindings", json={"bindings": items})
    assert answer.status_code in (200, 403), answer.text
    if answer.status_code == 200:
        assert [r["status"] for r in answer.json()["results"]] == [422, 403]

    # a name with bob's namespace as a prefix is a name in her own namespace: none such
    answer = await alice.put(path, json={"cluster": ref("a", "b/cluster-b")})
    assert answer.status_code in (200, 422), answer.text
    if answer.status_code == 200:

        async def unreachable() -> bool:
            reason = (await world.status("alice", "web", "a")).get("deploy_reason") or {}
            return reason.get("code") == "CLUSTER_NOT_REACHABLE"

        await wait_for(unreachable, timeout=15, message="no such cluster of hers")
    await untouched(world, before)


async def test_status_patch_forms_write_no_controllers_field(world: World) -> None:
    """Case, ``null``, a JSON patch, duplicate keys and a batch create carry no
    controller's field into alice's status."""
    before = await bobs_web(world)
    await alices_web(world)
    alice = world.http["alice"]
    path = f"{APPS.format(ns='a')}/web/status"
    steer = [{"cluster": ref("b", "cluster-b"), "replicas": 1}]
    for field in ("Placements", "placements ", "PLACEMENTS", "place\u200bments"):
        answer = await alice.patch(path, json={"status": {field: steer}})
        assert answer.status_code == 422, (field, answer.text)
    for field in ("placements", "running_on", "copies", "pending_cleanups"):
        answer = await alice.patch(path, json={"status": {field: None}})
        assert answer.status_code == 403, (field, answer.text)
    json_patch = [{"op": "add", "path": "/status/placements", "value": steer}]
    answer = await alice.patch(
        path, json=json_patch, headers={"content-type": "application/json-patch+json"}
    )
    assert 400 <= answer.status_code < 500, answer.text
    twice = (
        b'{"status": {"deploy_reason": null}, "status": {"placements": '
        b'[{"cluster": {"api": "kubernetes", "kind": "Cluster", "namespace": "b", '
        b'"name": "cluster-b"}, "replicas": 1}]}}'
    )
    answer = await alice.patch(path, content=twice, headers={"content-type": "application/json"})
    assert 400 <= answer.status_code < 500, answer.text
    # a batch create with a status: created, its status the initial one
    item = {**app("web3", "a", [deployment("web", "evil:1")], conflict_resolution="overwrite"),
            "status": {"scheduled_to": ref("b", "cluster-b"), "placements": steer,
                       "kube_controller_triggered": "2099-01-01T00:00:00Z"}}  # fmt: skip
    answer = await alice.post("/kubernetes/applications", json={"items": [item]})
    assert answer.status_code == 200, answer.text
    stored = await world.status("alice", "web3", "a")
    assert stored["scheduled_to"] is None and stored.get("placements", []) == []
    stored = await world.status("alice", "web", "a")
    assert stored["scheduled_to"] is None and stored.get("placements", []) == []
    await untouched(world, before)


async def test_a_cluster_both_tenants_reach_keeps_each_ones_objects(world: World) -> None:
    """alice registers a cluster bob's member also serves (credentials of her own to a
    shared cluster). Connecting to it, the controller removes what Shoal left there for
    her namespace only: bob's running application is not hers to clean up."""
    before = await bobs_web(world)
    # what an application of hers, deleted, left there: hers to clean up
    left = configmap("left-over")
    left["metadata"]["labels"] = Owner("a", "old", "uid-of-a-deleted-app").labels
    await world.bobs.ensure_namespace("a")
    await world.bobs.apply(left, "a")
    shared = {
        "api": "kubernetes",
        "kind": "Cluster",
        "metadata": {"name": "shared", "namespace": "a"},
        "spec": {"kubeconfig": world.kubeconfigs["bob"], "metrics": []},
    }
    answer = await world.http["alice"].post("/kubernetes/namespaces/a/clusters", json=shared)
    assert answer.status_code == 200, answer.text

    async def pruned() -> bool:
        return await world.bobs.read(configmap("left-over"), "a") is None

    await wait_for(pruned, timeout=30, message="alice's left-over removed")
    await untouched(world, before)


async def alice_registers_bobs_cluster(world: World) -> httpx.AsyncClient:
    """alice registers ``shared`` in her namespace with bob's member's credentials (a
    cluster both reach); her HTTP client."""
    shared = {
        "api": "kubernetes",
        "kind": "Cluster",
        "metadata": {"name": "shared", "namespace": "a"},
        "spec": {"kubeconfig": world.kubeconfigs["bob"], "metrics": []},
    }
    alice = world.http["alice"]
    answer = await alice.post("/kubernetes/namespaces/a/clusters", json=shared)
    assert answer.status_code == 200, answer.text
    return alice


async def test_a_manifest_naming_anothers_object_on_a_shared_cluster_is_refused(
    world: World,
) -> None:
    """On a cluster both reach, alice's manifest names bob's Deployment in bob's Kubernetes
    namespace: refused as CONFLICT (another namespace's owner is not named), and deleting
    her application (or making it again under the same name) leaves bob's alone."""
    before = await bobs_web(world)
    alice = await alice_registers_bobs_cluster(world)
    theirs = deployment("web", "evil:1")
    theirs["metadata"]["namespace"] = "b"
    for attempt in range(2):  # the second: deleted and made again under its name
        await world.bound("alice", "a", "web", [theirs], "shared")
        message = await world.conflict("alice", "web", "a", message=f"CONFLICT ({attempt})")
        uid = before["metadata"]["labels"][LABEL_UID]
        assert uid not in message and "b/web" not in message
        assert (await alice.delete(f"{APPS.format(ns='a')}/web")).status_code == 200
        await wait_for(lambda: world.gone("alice", "web", "a"), timeout=15,
                       message="alice's application deleted")  # fmt: skip
        await untouched(world, before)


async def test_objects_without_a_namespace_on_a_shared_cluster_take_nothing_of_anothers(
    world: World,
) -> None:
    """alice registers a cluster bob's member also serves, with credentials whose context
    is bob's Kubernetes namespace: her Deployment ``web``, which names no namespace, goes
    there, where bob's ``web`` runs. Even with ``conflict_resolution: overwrite`` it is
    refused (the owner labels name another namespace's application), bob's stays his, and
    deleting her application leaves it."""
    before = await bobs_web(world)
    alice = await alice_registers_bobs_cluster(world)
    manifest = [deployment("web", "evil:1")]
    await world.bound("alice", "a", "web", manifest, "shared", conflict_resolution="overwrite")
    message = await world.conflict("alice", "web", "a", 30, "alice's application refused")
    assert "another namespace" in message and "b/web" not in message
    assert (await world.status("alice", "web", "a"))["kube_namespaces"] == {"shared": "b"}
    await untouched(world, before)
    assert (await alice.delete(f"{APPS.format(ns='a')}/web")).status_code == 200
    await wait_for(lambda: world.gone("alice", "web", "a"), timeout=15,
                   message="alice's application deleted")  # fmt: skip
    await untouched(world, before)
