"""CRUD of every kind, subresources, selectors, paging, finalizers and compare-and-swap."""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime
from typing import Any

import httpx
import pytest

from shoal.api.resources import KRAKE_KINDS
from shoal.api.server import ApiServer
from shoal.model import registry
from tests.api.conftest import start_watch
from tests.api.samples import APPLICATION, BY_KIND, CLUSTER, SAMPLES, Sample
from tests.util import made_by_tests, wait_for


def contains(big: Any, small: Any) -> bool:
    """``small`` is ``big`` with some defaulted fields left out."""
    if isinstance(small, dict) and isinstance(big, dict):
        return all(k in big and contains(big[k], v) for k, v in small.items())
    if isinstance(small, list) and isinstance(big, list):
        return len(big) == len(small) and all(map(contains, big, small))
    return bool(big == small)


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resource_version"])


async def create(
    http: httpx.AsyncClient, sample: Sample, name: str, ns: str = "default", **labels: str
) -> dict[str, Any]:
    namespace = ns if sample.namespaced else None
    response = await http.post(sample.collection(ns), json=sample.body(name, namespace, **labels))
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


def test_every_registered_kind_has_a_sample() -> None:
    covered = {(s.api, s.plural) for s in SAMPLES}
    for kind in registry.KINDS:
        assert (kind.api_name(), kind.plural) in covered, kind.kind_name()
        sample = next(s for s in SAMPLES if s.plural == kind.plural)
        assert sample.namespaced == kind.namespaced


async def test_crud(http: httpx.AsyncClient) -> None:
    for sample in SAMPLES:
        await _crud(http, sample)


async def _crud(http: httpx.AsyncClient, sample: Sample) -> None:
    created = await create(http, sample, "one", env="prod")
    meta = created["metadata"]
    assert created["api"] == sample.api and created["kind"] == sample.kind
    assert meta["name"] == "one" and meta["labels"] == {"env": "prod"}
    assert meta["uid"] and meta["created"] and meta["modified"] and meta["deleted"] is None
    assert meta["namespace"] == ("default" if sample.namespaced else None)
    assert meta["resource_version"] > 0

    got = (await http.get(sample.item("one"))).json()
    assert got == created

    listed = (await http.get(sample.collection())).json()
    assert listed["kind"] == f"{sample.kind}List" and listed["api"] == sample.api
    assert listed["metadata"]["resource_version"] >= rv(created)
    assert [i["metadata"]["name"] for i in made_by_tests(listed["items"])] == ["one"]

    # update the spec: modified moves, resource_version moves, uid/created stay
    body = copy.deepcopy(got)
    sample.change(body)
    body["metadata"]["labels"]["tier"] = "gold"
    response = await http.put(sample.item("one"), json=body)
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["metadata"]["labels"] == {"env": "prod", "tier": "gold"}
    assert rv(updated) > rv(created)
    assert updated["metadata"]["modified"] > created["metadata"]["modified"]
    assert updated["metadata"]["uid"] == meta["uid"]
    assert updated["metadata"]["created"] == meta["created"]
    for field in body:
        if field not in ("metadata", "status"):
            assert contains(updated[field], body[field]), field

    # server-owned metadata in an update body is ignored
    body = copy.deepcopy(updated)
    body["metadata"]["uid"] = "forged"
    body["metadata"]["created"] = "2000-01-01T00:00:00Z"
    forged = await http.put(sample.item("one"), json=body)
    assert forged.status_code == 200, forged.text
    assert forged.json()["metadata"]["uid"] == meta["uid"]
    assert forged.json()["metadata"]["created"] == meta["created"]
    assert rv(forged.json()) == rv(updated)  # nothing written

    # the stored object sent back as it is: Krake's 400 on Krake's kinds
    again = await http.put(sample.item("one"), json=updated)
    if sample.kind in KRAKE_KINDS:
        assert again.status_code == 400, again.text
        assert again.json()["detail"] == "The body contained no update."
        assert again.json()["title"] == "UPDATE_ERROR"
    else:  # Shoal's own kinds answer as Kubernetes does: the object, unchanged
        assert again.status_code == 200, again.text
        assert rv(again.json()) == rv(updated)

    response = await http.delete(sample.item("one"))
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["deleted"] is not None
    assert (await http.get(sample.item("one"))).status_code == 404
    assert (await http.delete(sample.item("one"))).status_code == 404
    assert (await http.put(sample.item("one"), json=body)).status_code == 404


async def test_duplicate_create_is_409(http: httpx.AsyncClient) -> None:
    for sample in SAMPLES:
        await _duplicate_create_is_409(http, sample)


async def _duplicate_create_is_409(http: httpx.AsyncClient, sample: Sample) -> None:
    await create(http, sample, "dup")
    namespace = "default" if sample.namespaced else None
    response = await http.post(sample.collection(), json=sample.body("dup", namespace))
    assert response.status_code == 409
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["title"] == "RESOURCE_ALREADY_EXISTS"


async def test_namespaces_and_list_all(http: httpx.AsyncClient) -> None:
    for sample in [s for s in SAMPLES if s.namespaced]:
        await _namespaces_and_list_all(http, sample)


async def _namespaces_and_list_all(http: httpx.AsyncClient, sample: Sample) -> None:
    for ns in ("a", "b"):
        for name in ("x", "y"):
            await create(http, sample, name, ns)
    # same name in two namespaces are two objects
    a = (await http.get(sample.collection("a"))).json()["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in a] == [
        ("a", "x"),
        ("a", "y"),
    ]
    everything = (await http.get(sample.collection(None))).json()
    assert everything["kind"] == f"{sample.kind}List"
    assert sorted(
        (i["metadata"]["namespace"], i["metadata"]["name"]) for i in everything["items"]
    ) == [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
    # namespace in the body must match the URL
    response = await http.post(sample.collection("a"), json=sample.body("z", "b"))
    assert response.status_code == 422
    assert "metadata.namespace" in response.json()["detail"]
    # a body without a namespace gets the URL's
    response = await http.post(sample.collection("c"), json=sample.body("z"))
    assert response.status_code in (200, 201)
    assert response.json()["metadata"]["namespace"] == "c"
    assert (await http.get(sample.item("x", "c"))).status_code == 404


async def test_update_name_must_match_url(http: httpx.AsyncClient) -> None:
    created = await create(http, APPLICATION, "web")
    created["metadata"]["name"] = "other"
    response = await http.put(APPLICATION.item("web"), json=created)
    assert response.status_code == 422
    assert "metadata.name" in response.json()["detail"]


# status ---------------------------------------------------------------------------


async def test_status_subresource(http: httpx.AsyncClient) -> None:
    for sample in [s for s in SAMPLES if "status" in s.subresources]:
        await _status_subresource(http, sample)


async def _status_subresource(http: httpx.AsyncClient, sample: Sample) -> None:
    created = await create(http, sample, "s")
    body = copy.deepcopy(created)
    sample.change(body)  # spec changes in a status PUT are ignored
    body["metadata"]["labels"] = {"ignored": "yes"}
    status = body.setdefault("status", {})  # a provider's health is left out while empty
    if sample.kind == "Application":
        status["state"] = "RUNNING"
        status["reason"] = {"code": "KUBERNETES_ERROR", "message": "boom"}
        # a Krake client's state is kept as the kube controller's (docs/status-ownership.md)
        status["deploy_state"], status["deploy_reason"] = "RUNNING", status["reason"]
    elif sample.kind == "Cluster":
        status["state"] = "OFFLINE"
        status["reason"] = {"code": "CLUSTER_NOT_REACHABLE", "message": "down"}
    elif sample.kind in ("Cloud", "GlobalCloud"):
        status["state"] = "FAILING_METRICS"
        status["metrics_reasons"] = {"load": {"code": "UNKNOWN_METRIC", "message": "?"}}
    elif sample.kind == "RescheduleTask":
        status["total"] = 2
        status["pending"] = 2
    elif sample.kind == "Pod":
        status.update(phase="Scheduled", cluster="c1", node="n-1", attempts=1)
    elif sample.kind == "Copy":
        status.update(generation=1, ready=True, ready_replicas=1)
    else:
        status["errors"] = 3
        status["reason"] = {"code": "UNREACHABLE_METRICS_PROVIDER", "message": "x"}
    response = await http.put(sample.item("s") + "/status", json=body)
    assert response.status_code == 200, response.text
    after = response.json()
    assert contains(after["status"], status)
    assert rv(after) > rv(created)
    assert after["metadata"]["modified"] == created["metadata"]["modified"]
    assert after["metadata"]["labels"] == {}
    for field in created:
        if field not in ("metadata", "status"):
            assert after[field] == created[field]
    # stale resource_version on a status update → 409
    response = await http.put(sample.item("s") + "/status", json=body)
    assert response.status_code == 409
    # status on create is ignored: the default status is stored
    namespace = "default" if sample.namespaced else None
    fresh = sample.body("t", namespace)
    fresh["status"] = status
    response = await http.post(sample.collection(), json=fresh)
    assert response.status_code in (200, 201)
    assert response.json().get("status") == created.get("status")


async def test_no_status_subresource(http: httpx.AsyncClient) -> None:
    for sample in [s for s in SAMPLES if "status" not in s.subresources]:
        await _no_status_subresource(http, sample)


async def _no_status_subresource(http: httpx.AsyncClient, sample: Sample) -> None:
    created = await create(http, sample, "s")
    response = await http.put(sample.item("s") + "/status", json=created)
    assert response.status_code in (404, 405)


# binding --------------------------------------------------------------------------


def cluster_ref(name: str) -> dict[str, Any]:
    return {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": name}


async def test_application_binding(http: httpx.AsyncClient) -> None:
    app = await create(http, APPLICATION, "web")
    url = APPLICATION.item("web") + "/binding"
    response = await http.put(url, json={"cluster": cluster_ref("c1")})
    assert response.status_code == 200, response.text
    first = response.json()
    status = first["status"]
    assert status["scheduled_to"] == cluster_ref("c1")
    assert status["scheduled"] is not None
    assert status["kube_controller_triggered"] is not None
    assert status["kube_controller_triggered"] >= first["metadata"]["modified"]
    assert first["metadata"]["modified"] == app["metadata"]["modified"]

    # same cluster again: scheduled stays, kube_controller_triggered moves
    second = (await http.put(url, json={"cluster": cluster_ref("c1")})).json()
    assert second["status"]["scheduled"] == status["scheduled"]
    assert second["status"]["kube_controller_triggered"] > status["kube_controller_triggered"]

    # another cluster: scheduled moves
    third = (await http.put(url, json={"cluster": cluster_ref("c2")})).json()
    assert third["status"]["scheduled_to"]["name"] == "c2"
    assert third["status"]["scheduled"] > status["scheduled"]

    # triggered false leaves kube_controller_triggered alone; explanation is stored
    body = {"cluster": cluster_ref("c2"), "triggered": False, "explanation": {"winner": "c2"}}
    fourth = (await http.put(url, json=body)).json()
    assert (
        fourth["status"]["kube_controller_triggered"]
        == third["status"]["kube_controller_triggered"]
    )
    assert fourth["status"]["scheduling"] == {"winner": "c2"}

    # compare-and-swap on the binding
    stale = {"cluster": cluster_ref("c1"), "resource_version": rv(app)}
    response = await http.put(url, json=stale)
    assert response.status_code == 409
    assert response.headers["content-type"].startswith("application/problem+json")
    fresh = {"cluster": cluster_ref("c1"), "resource_version": rv(fourth)}
    assert (await http.put(url, json=fresh)).status_code == 200

    # a binding must name a Cluster
    bad = {"cluster": {"api": "core", "kind": "Metric", "namespace": "default", "name": "m"}}
    response = await http.put(url, json=bad)
    assert response.status_code == 422 and "cluster" in response.json()["detail"]
    assert (
        await http.put(APPLICATION.item("nope") + "/binding", json={"cluster": cluster_ref("c1")})
    ).status_code == 404


async def test_binding_a_deleting_application_is_409(http: httpx.AsyncClient) -> None:
    body = APPLICATION.body("web", "default")
    body["metadata"]["finalizers"] = ["shoal/kube"]
    assert (await http.post(APPLICATION.collection(), json=body)).status_code in (200, 201)
    assert (await http.delete(APPLICATION.item("web"))).status_code == 200
    response = await http.put(
        APPLICATION.item("web") + "/binding", json={"cluster": cluster_ref("c")}
    )
    assert response.status_code == 409


async def test_cluster_binding(http: httpx.AsyncClient) -> None:
    cluster = await create(http, CLUSTER, "c1")
    url = CLUSTER.item("c1") + "/binding"
    cloud = {"api": "infrastructure", "kind": "GlobalCloud", "namespace": None, "name": "os"}
    response = await http.put(url, json={"cloud": cloud})
    assert response.status_code == 422  # a binding names a cloud that exists
    await create(http, BY_KIND["GlobalCloud"], "os")
    response = await http.put(url, json={"cloud": cloud})
    assert response.status_code == 200, response.text
    status = response.json()["status"]
    assert status["scheduled_to"] == cloud
    assert status["scheduled"] and status["kube_controller_triggered"]
    again = (await http.put(url, json={"cloud": cloud})).json()["status"]
    assert again["scheduled"] == status["scheduled"]
    other = {**cloud, "kind": "Cloud", "namespace": "default", "name": "os2"}
    await create(http, BY_KIND["Cloud"], "os2")
    moved = (await http.put(url, json={"cloud": other})).json()["status"]
    assert moved["scheduled"] > status["scheduled"]
    stale = await http.put(url, json={"cloud": cloud, "resource_version": rv(cluster)})
    assert stale.status_code == 409
    bad = await http.put(url, json={"cloud": cluster_ref("x")})
    assert bad.status_code == 422


# retry, complete, shutdown ------------------------------------------------------------


async def set_status(http: httpx.AsyncClient, name: str, **fields: Any) -> dict[str, Any]:
    app = (await http.get(APPLICATION.item(name))).json()
    app["status"].update(fields)
    response = await http.put(APPLICATION.item(name) + "/status", json=app)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_retry(http: httpx.AsyncClient) -> None:
    await create(http, APPLICATION, "web")
    response = await http.put(APPLICATION.item("web") + "/retry")
    assert response.status_code == 400
    assert response.json()["title"] == "INVALID_STATE"
    failed = await set_status(
        http,
        "web",
        state="FAILED",
        reason={"code": "NO_SUITABLE_RESOURCE", "message": "none"},
        scheduler_retries=0,
    )
    response = await http.put(APPLICATION.item("web") + "/retry")
    assert response.status_code == 200, response.text
    retried = response.json()
    assert retried["status"]["state"] == "PENDING"
    assert retried["status"]["reason"] is None
    assert "scheduler_retries" not in retried["status"]  # left out while unset
    assert retried["metadata"]["modified"] > failed["metadata"]["modified"]
    assert (await http.put(APPLICATION.item("nope") + "/retry")).status_code == 404


async def test_retry_of_a_deleting_application_goes_to_deleting(http: httpx.AsyncClient) -> None:
    body = APPLICATION.body("web", "default")
    body["metadata"]["finalizers"] = ["shoal/kube"]
    await http.post(APPLICATION.collection(), json=body)
    await http.delete(APPLICATION.item("web"))
    await set_status(http, "web", state="FAILED", reason={"code": "DELETE_FAILED", "message": ""})
    retried = (await http.put(APPLICATION.item("web") + "/retry")).json()
    assert retried["status"]["state"] == "DELETING"


@pytest.mark.parametrize("sub", ["complete", "shutdown"])
async def test_complete_and_shutdown_tokens(http: httpx.AsyncClient, sub: str) -> None:
    await create(http, APPLICATION, "web")
    url = APPLICATION.item("web") + f"/{sub}"
    # no token issued yet: any token is refused
    response = await http.put(url, json={"token": "guess"})
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    await set_status(http, "web", **{f"{sub}_token": "s3cret"})
    assert (await http.put(url, json={"token": "wrong"})).status_code == 401
    assert (await http.put(url, json={})).status_code == 401
    response = await http.put(url, json={"token": "s3cret"})
    assert response.status_code == 200, response.text
    if sub == "complete":  # deletes the application
        assert response.json()["metadata"]["deleted"] is not None
        assert (await http.get(APPLICATION.item("web"))).status_code == 404
        # gone: answered as a wrong token, so that no caller learns which applications exist
        assert (await http.put(url, json={"token": "s3cret"})).status_code == 401
        return
    # shutdown, as Krake: only a copy waiting to be removed becomes READY_FOR_ACTION
    assert response.json()["status"]["state"] == "PENDING"
    assert response.json()["metadata"]["deleted"] is None
    await set_status(http, "web", state="WAITING_FOR_CLEANING")
    response = await http.put(url, json={"token": "s3cret"})
    assert response.status_code == 200, response.text
    assert response.json()["status"]["state"] == "READY_FOR_ACTION"
    assert response.json()["metadata"]["deleted"] is None


# label selectors and paging ---------------------------------------------------------


async def test_label_selectors(http: httpx.AsyncClient) -> None:
    labels = {
        "a": {"env": "prod", "zone": "de"},
        "b": {"env": "prod", "zone": "fr"},
        "c": {"env": "dev", "zone": "de"},
        "d": {"env": "prod"},
        "e": {},
    }
    for name, ls in labels.items():
        await create(http, APPLICATION, name, **ls)

    async def names(selector: str, path: str | None = None) -> list[str]:
        response = await http.get(
            path or APPLICATION.collection(), params={"label_selector": selector}
        )
        assert response.status_code == 200, response.text
        return [i["metadata"]["name"] for i in response.json()["items"]]

    assert await names("env=prod") == ["a", "b", "d"]
    assert await names("env!=prod") == ["c", "e"]
    assert await names("zone in (de,fr)") == ["a", "b", "c"]
    assert await names("zone notin (de)") == ["b", "d", "e"]
    assert await names("env=prod,zone!=fr,zone in (de,fr)") == ["a"]
    assert await names("env=prod,zone!=fr") == ["a", "d"]
    assert await names("zone") == ["a", "b", "c"]
    assert await names("!zone") == ["d", "e"]
    assert await names("") == ["a", "b", "c", "d", "e"]
    assert await names("env=prod", APPLICATION.collection(None)) == ["a", "b", "d"]
    # with paging too
    response = await http.get(
        APPLICATION.collection(), params={"label_selector": "env=prod", "limit": 2}
    )
    page = response.json()
    assert [i["metadata"]["name"] for i in page["items"]] == ["a", "b"]
    response = await http.get(
        APPLICATION.collection(),
        params={"label_selector": "env=prod", "limit": 2, "continue": page["metadata"]["continue"]},
    )
    assert [i["metadata"]["name"] for i in response.json()["items"]] == ["d"]
    assert "continue" not in response.json()["metadata"]

    for bad in ("env in (", "=x", "env==,", "a b c"):
        response = await http.get(APPLICATION.collection(), params={"label_selector": bad})
        assert response.status_code == 400, bad
        assert "label_selector" in response.json()["detail"]


async def test_paging_returns_every_item_once(http: httpx.AsyncClient) -> None:
    names = [f"app-{i:03d}" for i in range(53)]
    for ns in ("a", "b"):
        await asyncio.gather(*(create(http, APPLICATION, n, ns) for n in names))
    for limit, path, expected in (
        (limit, path, expected)
        for limit in (1, 7, 53, 200)
        for path, expected in (
            (APPLICATION.collection("a"), [("a", n) for n in names]),
            (APPLICATION.collection(None), [(ns, n) for ns in ("a", "b") for n in names]),
        )
    ):
        seen: list[tuple[str, str]] = []
        params: dict[str, Any] = {"limit": limit}
        pages = 0
        while True:
            body = (await http.get(path, params=params)).json()
            pages += 1
            assert len(body["items"]) <= limit
            seen += [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]]
            token = body["metadata"].get("continue")
            if not token:
                break
            params["continue"] = token
            # objects created meanwhile in an earlier position are not repeated
        assert seen == expected
        assert pages == -(-len(expected) // limit)


async def test_paging_with_concurrent_writes(http: httpx.AsyncClient) -> None:
    names = [f"app-{i:03d}" for i in range(40)]
    for n in names:
        await create(http, APPLICATION, n)
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 10}
    while True:
        body = (await http.get(APPLICATION.collection(), params=params)).json()
        seen += [i["metadata"]["name"] for i in body["items"]]
        await create(http, APPLICATION, f"aaa-{len(seen)}")  # sorts before everything
        token = body["metadata"].get("continue")
        if not token:
            break
        params["continue"] = token
    assert seen == names


async def test_bad_continue_token(http: httpx.AsyncClient) -> None:
    for token in ("garbage!", "eyJ4IjoxfQ"):
        response = await http.get(APPLICATION.collection(), params={"limit": 1, "continue": token})
        assert response.status_code == 400
        assert "continue" in response.json()["detail"]
    await create(http, CLUSTER, "c1")
    await create(http, CLUSTER, "c2")
    token = (await http.get(CLUSTER.collection(), params={"limit": 1})).json()["metadata"][
        "continue"
    ]
    response = await http.get(APPLICATION.collection(), params={"limit": 1, "continue": token})
    assert response.status_code == 400


# finalizers and two-phase deletion -------------------------------------------------------


async def test_finalizers(http: httpx.AsyncClient) -> None:
    for sample in SAMPLES:
        await _finalizers(http, sample)


async def _finalizers(http: httpx.AsyncClient, sample: Sample) -> None:
    namespace = "default" if sample.namespaced else None
    body = sample.body("f", namespace)
    body["metadata"]["finalizers"] = ["shoal/gc", "shoal/kube"]
    created = (await http.post(sample.collection(), json=body)).json()
    watch = await start_watch(http, sample.collection(), heartbeat=1.0)
    try:
        response = await http.delete(sample.item("f"))
        assert response.status_code == 200
        deleting = response.json()
        assert deleting["metadata"]["deleted"] is not None
        assert rv(deleting) > rv(created)
        # still there, and deleting again changes nothing
        got = (await http.get(sample.item("f"))).json()
        assert got["metadata"]["deleted"] == deleting["metadata"]["deleted"]
        again = (await http.delete(sample.item("f"))).json()
        assert rv(again) == rv(deleting)
        # remove one finalizer: still there
        got["metadata"]["finalizers"] = ["shoal/kube"]
        response = await http.put(sample.item("f"), json=got)
        assert response.status_code == 200
        one_left = response.json()
        assert one_left["metadata"]["deleted"] == deleting["metadata"]["deleted"]
        assert (await http.get(sample.item("f"))).status_code == 200
        # remove the last one: gone, DELETED emitted
        one_left["metadata"]["finalizers"] = []
        response = await http.put(sample.item("f"), json=one_left)
        assert response.status_code == 200
        assert (await http.get(sample.item("f"))).status_code == 404
        await wait_for(lambda: len(watch.events) >= 3, message="three events")
        assert [e["type"] for e in watch.events] == ["MODIFIED", "MODIFIED", "DELETED"]
        assert watch.events[-1]["object"]["metadata"]["name"] == "f"
        assert watch.events[-1]["object"]["metadata"]["deleted"] is not None
        assert watch.revisions() == sorted(watch.revisions())
    finally:
        await watch.stop()


async def test_update_without_resource_version_is_unconditional(http: httpx.AsyncClient) -> None:
    created = await create(http, APPLICATION, "web")
    body = copy.deepcopy(created)
    body["metadata"]["labels"] = {"v": "1"}
    assert (await http.put(APPLICATION.item("web"), json=body)).status_code == 200
    body["metadata"]["labels"] = {"v": "2"}
    assert (await http.put(APPLICATION.item("web"), json=body)).status_code == 409  # stale
    del body["metadata"]["resource_version"]
    response = await http.put(APPLICATION.item("web"), json=body)
    assert response.status_code == 200
    assert response.json()["metadata"]["labels"] == {"v": "2"}


@pytest.mark.parametrize("writers", [2, 16])
async def test_concurrent_updates_same_resource_version(
    http: httpx.AsyncClient, writers: int
) -> None:
    created = await create(http, APPLICATION, "web")

    async def write(i: int) -> int:
        body = copy.deepcopy(created)
        body["metadata"]["labels"] = {"writer": str(i)}
        return (await http.put(APPLICATION.item("web"), json=body)).status_code

    codes = await asyncio.gather(*(write(i) for i in range(writers)))
    assert sorted(codes) == [200] + [409] * (writers - 1)
    # same for status
    current = (await http.get(APPLICATION.item("web"))).json()

    async def status(i: int) -> int:
        body = copy.deepcopy(current)
        body["status"]["services"] = {"writer": i}
        return (await http.put(APPLICATION.item("web") + "/status", json=body)).status_code

    codes = await asyncio.gather(*(status(i) for i in range(writers)))
    assert sorted(codes) == [200] + [409] * (writers - 1)


async def test_create_response_timestamps_are_rfc3339_utc(http: httpx.AsyncClient) -> None:
    created = await create(http, APPLICATION, "web")
    stamp = created["metadata"]["created"]
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert parsed.utcoffset() is not None and parsed.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


async def test_scheduling_dryrun_binds_nothing(http: httpx.AsyncClient, api: ApiServer) -> None:
    app = APPLICATION.body("web", "default")
    app["spec"]["constraints"]["cluster"] = {"labels": [], "metrics": []}
    response = await http.post("/scheduling/namespaces/default/dryrun", json=app)
    assert response.status_code < 500, response.text
    assert (await http.get(APPLICATION.item("web"))).status_code == 404
