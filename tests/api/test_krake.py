"""A Krake client, as written for Krake, works against Shoal unchanged.

Only httpx and json here, no Shoal code (beside Krake's field table, which is
data): Krake's routes, JSON bodies with enum names, metadata without
``resource_version`` (Krake's metadata has none, so its updates are
unconditional), and its ndjson watch stream.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from shoal.model import krake
from tests.api.samples import SAMPLES
from tests.util import made_by_tests


def krake_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """Metadata as a Krake client holds it: Krake's fields only."""
    keep = (
        "name",
        "namespace",
        "labels",
        "inherit_labels",
        "finalizers",
        "uid",
        "created",
        "modified",
        "deleted",
        "owners",
    )
    return {k: v for k, v in obj["metadata"].items() if k in keep}


async def test_krake_client_round_trip_of_every_kind(http: httpx.AsyncClient) -> None:
    for sample in SAMPLES:
        ns = "krake" if sample.namespaced else None
        base = (
            f"/{sample.api}/namespaces/krake/{sample.plural}"
            if ns
            else f"/{sample.api}/{sample.plural}"
        )
        events: list[dict[str, Any]] = []

        async def watch(base: str = base, events: list[dict[str, Any]] = events) -> None:
            async with http.stream("GET", base, params={"watch": ""}, timeout=None) as response:
                assert response.headers["content-type"].startswith("application/x-ndjson")
                async for line in response.aiter_lines():
                    if line.strip():
                        events.append(json.loads(line))

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.05)  # Krake's watch has no start marker either
        try:
            body = sample.body("krake-obj", ns)
            response = await http.post(
                base, content=json.dumps(body), headers={"Content-Type": "application/json"}
            )
            assert response.status_code in (200, 201), (sample.kind, response.text)
            created = response.json()
            assert created["metadata"]["uid"]

            listed = (await http.get(base)).json()
            assert listed["kind"] == f"{sample.kind}List"
            names = [i["metadata"]["name"] for i in made_by_tests(listed["items"])]
            assert names == ["krake-obj"]
            if sample.namespaced:
                every = (await http.get(f"/{sample.api}/{sample.plural}")).json()
                assert [i["metadata"]["name"] for i in every["items"]] == ["krake-obj"]

            # Krake update: the object it read, changed, sent back without resource_version
            obj = (await http.get(f"{base}/krake-obj")).json()
            update = {k: v for k, v in obj.items() if k != "status"}
            update["metadata"] = krake_metadata(obj)
            update["metadata"]["labels"] = {"managed-by": "krake"}
            sample.change(update)
            response = await http.put(f"{base}/krake-obj", json=update)
            assert response.status_code == 200, (sample.kind, response.text)
            assert response.json()["metadata"]["labels"] == {"managed-by": "krake"}
            # ...and again with the same (older) body: still unconditional
            update["metadata"]["labels"] = {"managed-by": "krake", "n": "2"}
            response = await http.put(f"{base}/krake-obj", json=update)
            assert response.status_code == 200, (sample.kind, response.text)

            if "status" in sample.subresources:
                obj = (await http.get(f"{base}/krake-obj")).json()
                obj["metadata"] = krake_metadata(obj)
                obj.setdefault("status", {})  # a provider's health is left out while empty
                if sample.kind == "Application":
                    obj["status"]["state"] = "RUNNING"
                    obj["status"]["reason"] = {"code": "RESOURCE_NOT_FOUND", "message": "x"}
                elif sample.kind == "Cluster":
                    obj["status"]["state"] = "ONLINE"
                response = await http.put(f"{base}/krake-obj/status", json=obj)
                assert response.status_code == 200, (sample.kind, response.text)
                status = response.json().get("status")  # a provider's: left out while empty
                if sample.kind == "Application":
                    assert status["state"] == "RUNNING"
                    assert status["reason"]["code"] == "RESOURCE_NOT_FOUND"  # a name, not 12

            response = await http.delete(f"{base}/krake-obj")
            assert response.status_code == 200, (sample.kind, response.text)
            assert (await http.get(f"{base}/krake-obj")).status_code == 404

            for _ in range(200):
                if events and events[-1]["type"] == "DELETED":
                    break
                await asyncio.sleep(0.01)
            types = [e["type"] for e in events]
            assert types[0] == "ADDED" and types[-1] == "DELETED", (sample.kind, types)
            assert set(types[1:-1]) <= {"MODIFIED"}
            assert all(e["object"]["kind"] == sample.kind for e in events)
        finally:
            watcher.cancel()
            try:
                await watcher
            except asyncio.CancelledError:
                pass


async def test_krake_enum_numbers_are_read_but_names_are_written(http: httpx.AsyncClient) -> None:
    sample = next(s for s in SAMPLES if s.kind == "Application")
    base = "/kubernetes/namespaces/krake/applications"
    await http.post(base, json=sample.body("web", "krake"))
    obj = (await http.get(f"{base}/web")).json()
    obj["status"]["reason"] = {"code": 12, "message": "numbers from old clients"}
    response = await http.put(f"{base}/web/status", json=obj)
    assert response.status_code == 200, response.text
    assert response.json()["status"]["reason"]["code"] == "RESOURCE_NOT_FOUND"


# Krake 1.0.1's own bodies and fields ---------------------------------------------------

APPS = "/kubernetes/namespaces/krake/applications"
CLUSTERS = "/kubernetes/namespaces/krake/clusters"
CLUSTER_REF = {"api": "kubernetes", "kind": "Cluster", "namespace": "krake", "name": "c1"}
CLOUD_REF = {"api": "infrastructure", "kind": "Cloud", "namespace": "krake", "name": "os"}


async def _app(http: httpx.AsyncClient, name: str = "web") -> dict[str, Any]:
    response = await http.post(
        APPS, json=next(s for s in SAMPLES if s.kind == "Application").body(name, "krake")
    )
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


async def _put_status(
    http: httpx.AsyncClient, obj: dict[str, Any], **status: Any
) -> httpx.Response:
    obj["metadata"] = krake_metadata(obj)
    obj["status"].update(status)
    return await http.put(f"{APPS}/{obj['metadata']['name']}/status", json=obj)


async def test_krake_cluster_binding_body_binds_the_application(http: httpx.AsyncClient) -> None:
    await _app(http)
    body = {"api": "kubernetes", "kind": "ClusterBinding", "cluster": CLUSTER_REF}
    response = await http.put(f"{APPS}/web/binding", json=body)
    assert response.status_code == 200, response.text
    status = response.json()["status"]
    assert status["scheduled_to"] == CLUSTER_REF
    assert status["scheduled"] is not None and status["kube_controller_triggered"] is not None


async def test_application_binding_of_the_wrong_kind_says_which_kind(
    http: httpx.AsyncClient,
) -> None:
    await _app(http)
    body = {"api": "infrastructure", "kind": "CloudBinding", "cluster": CLUSTER_REF}
    response = await http.put(f"{APPS}/web/binding", json=body)
    assert response.status_code == 422
    assert "ClusterBinding" in response.json()["detail"]
    assert "kubernetes" in response.json()["detail"]


async def test_krake_cloud_binding_body_binds_the_cluster(http: httpx.AsyncClient) -> None:
    cluster = next(s for s in SAMPLES if s.kind == "Cluster").body("c1", "krake")
    assert (await http.post(CLUSTERS, json=cluster)).status_code in (200, 201)
    cloud = next(s for s in SAMPLES if s.kind == "Cloud")
    answer = await http.post(cloud.collection("krake"), json=cloud.body("os", "krake"))
    assert answer.status_code in (200, 201), answer.text
    body = {"api": "infrastructure", "kind": "CloudBinding", "cloud": CLOUD_REF}
    response = await http.put(f"{CLUSTERS}/c1/binding", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["status"]["scheduled_to"] == CLOUD_REF
    wrong = {"api": "kubernetes", "kind": "ClusterBinding", "cloud": CLOUD_REF}
    response = await http.put(f"{CLUSTERS}/c1/binding", json=wrong)
    assert response.status_code == 422
    assert "CloudBinding" in response.json()["detail"]


async def test_krake_defaults_are_sent_instead_of_null(http: httpx.AsyncClient) -> None:
    app = await _app(http)
    assert app["spec"]["tosca"] == {}
    tosca = {"tosca_definitions_version": "tosca_simple_yaml_1_0",
             "topology_template": {"outputs": {"kubeconfig": {"value": "x"}}}}
    cloud_cluster = {"metadata": {"name": "new"}, "spec": {"tosca": tosca}}
    response = await http.post(CLUSTERS, json=cloud_cluster)
    assert response.status_code in (200, 201), response.text
    cluster = response.json()
    assert cluster["spec"]["kubeconfig"] == {}  # Krake's "no kubeconfig"
    assert cluster["status"]["last_applied_tosca"] == {}
    assert cluster["status"]["retries"] == 0
    # Krake sends the object back as it read it: {} for the kubeconfig stays "none"
    cluster["metadata"] = krake_metadata(cluster)
    response = await http.put(f"{CLUSTERS}/new", json=cluster)
    assert response.status_code == 400, response.text  # as Krake: nothing to update
    assert response.json()["detail"] == "The body contained no update."
    cluster["metadata"]["labels"] = {"changed": "yes"}
    response = await http.put(f"{CLUSTERS}/new", json=cluster)
    assert response.status_code == 200, response.text
    assert response.json()["spec"]["kubeconfig"] == {}


async def test_krake_application_status_fields_are_accepted(http: httpx.AsyncClient) -> None:
    app = await _app(http)
    krake_status = {
        "scheduled_retry": "2024-01-01T00:00:00Z",
        "complete_cert": "CERT",
        "complete_key": "KEY",
        "shutdown_cert": "CERT2",
        "shutdown_key": "KEY2",
        "shutdown_grace_period": "2024-01-01T00:01:00Z",
        "retries": None,
    }
    response = await _put_status(http, app, **krake_status)
    assert response.status_code == 200, response.text
    status = response.json()["status"]
    assert {k: status[k] for k in krake_status} == krake_status
    app = response.json()
    strict = await http.put(
        f"{APPS}/web/status",
        params={"fieldValidation": "Strict"},
        json={**app, "metadata": krake_metadata(app),
              "status": {**app["status"], "not_a_krake_field": 1}},
    )  # fmt: skip
    assert strict.status_code == 422, strict.text
    assert strict.json()["errors"][0]["field"] == "status.not_a_krake_field"
    # by default, as Krake's API: dropped, and named in a Warning header
    response = await _put_status(http, app, not_a_krake_field=1)
    assert response.status_code == 200, response.text
    assert response.headers["warning"] == '299 - "unknown field \\"status.not_a_krake_field\\""'
    assert "not_a_krake_field" not in response.json()["status"]


async def test_krake_complete_and_shutdown_bodies(http: httpx.AsyncClient) -> None:
    for name, sub, kind in (("done", "complete", "Complete"), ("down", "shutdown", "Shutdown")):
        app = await _app(http, name)
        response = await _put_status(http, app, **{f"{sub}_token": "secret"})
        assert response.status_code == 200, response.text
        body = {"api": "kubernetes", "kind": kind, "token": "wrong"}
        response = await http.put(f"{APPS}/{name}/{sub}", json=body)
        assert response.status_code == 401, (sub, response.text)
        body["token"] = "secret"
        response = await http.put(f"{APPS}/{name}/{sub}", json=body)
        assert response.status_code == 200, (sub, response.text)
        deleted = response.json()["metadata"]["deleted"]
        assert deleted is not None if sub == "complete" else deleted is None  # as Krake
        other = "Shutdown" if kind == "Complete" else "Complete"
        response = await http.put(f"{APPS}/{name}/{sub}", json={**body, "kind": other})
        assert response.status_code == 422 and kind in response.json()["detail"]


async def test_krake_retry_of_an_application_that_did_not_fail(http: httpx.AsyncClient) -> None:
    await _app(http)
    response = await http.put(f"{APPS}/web/retry")
    assert response.status_code == 400  # as Krake: nothing to retry
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_krake_cloud_and_role_fields(http: httpx.AsyncClient) -> None:
    cloud = next(s for s in SAMPLES if s.kind == "Cloud").body("os", "krake")
    password = cloud["spec"]["openstack"]["auth"]["password"]
    password["user"]["comment"] = None  # Krake's UserReference and ProjectReference
    password["project"]["comment"] = "team a"
    response = await http.post("/infrastructure/namespaces/krake/clouds", json=cloud)
    assert response.status_code in (200, 201), response.text
    rule = {"api": "kubernetes", "resources": ["applications"], "namespaces": [""],
            "verbs": ["list_all"]}  # fmt: skip
    role = {"metadata": {"name": "reader"}, "rules": [rule]}
    response = await http.post("/core/roles", json=role)
    assert response.status_code in (200, 201), response.text


def krake_forbidden_nulls(kind: str, obj: Any, prefix: str = "") -> list[str]:
    """Paths of ``obj`` holding null where Krake 1.0.1's schema (``shoal.model.krake``) has none."""
    found: list[str] = []
    fields = krake.FIELDS[kind]
    items = obj.items() if isinstance(obj, dict) else ()
    for key, value in items:
        path = f"{prefix}{key}"
        if path not in fields:
            continue  # a Shoal addition: Krake's client ignores it
        if value is None:
            parent = fields.get(path.rpartition(".")[0], ("",))[0]
            if fields[path][1] is not None and not parent.startswith("oneof:"):
                found.append(path)
        elif isinstance(value, dict):
            found += krake_forbidden_nulls(kind, value, f"{path}.")
            if fields[path][0].startswith("dict["):
                for inner in value.values():
                    found += krake_forbidden_nulls(kind, inner, f"{path}{{}}.")
        elif isinstance(value, list):
            for item in value:
                found += krake_forbidden_nulls(kind, item, f"{path}[].")
    return found


async def test_no_answer_holds_null_where_krake_forbids_it(http: httpx.AsyncClient) -> None:
    """Every kind Krake has, created, updated, listed: no null Krake's client would refuse."""
    seen: list[str] = []
    for sample in SAMPLES:
        if sample.kind not in krake.FIELDS:
            continue  # Shoal's own kinds
        ns = "krake" if sample.namespaced else None
        body = sample.body("nulls", ns)
        if sample.kind.endswith("Cloud"):
            body["spec"]["openstack"]["infrastructure_provider"] = {"name": "im"}
        created = (await http.post(sample.collection(ns), json=body)).json()
        listed = (await http.get(sample.collection(ns))).json()
        top = {path.split(".")[0].rstrip("[]{}") for path in krake.FIELDS[listed["kind"]]}
        assert top <= set(listed), listed["kind"]
        for obj in (created, *listed["items"]):
            seen.append(sample.kind)
            assert krake_forbidden_nulls(sample.kind, obj) == [], sample.kind
    assert set(seen) == {k for k in krake.FIELDS if k in {s.kind for s in SAMPLES}}


async def test_krake_provider_url_is_any_string_but_another_scheme(
    http: httpx.AsyncClient,
) -> None:
    """Krake's suite registers a provider at ``1.2.3.4:9090`` (no scheme) to make it
    unreachable: Krake stores any string there. A scheme other than HTTP's is refused."""
    for kind, body in (
        ("globalmetricsproviders", {"type": "prometheus", "prometheus": {"url": "1.2.3.4:9090"}}),
        ("globalmetricsproviders", {"type": "kafka", "kafka": {
            "url": "ksql:8088", "table": "t", "comparison_column": "c", "value_column": "v"}}),
    ):
        doc = {"api": "core", "kind": "GlobalMetricsProvider",
               "metadata": {"name": f"no-scheme-{body['type']}"}, "spec": body}  # fmt: skip
        created = await http.post(f"/core/{kind}", json=doc)
        assert created.status_code in (200, 201), created.text
        read = await http.get(f"/core/{kind}/no-scheme-{body['type']}")
        assert read.json()["spec"][body["type"]]["url"] == body[body["type"]]["url"]
    refused = await http.post("/core/globalmetricsproviders", json={
        "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "ftp"},
        "spec": {"type": "prometheus", "prometheus": {"url": "ftp://1.2.3.4/"}}})  # fmt: skip
    assert refused.status_code == 422
    assert "spec.prometheus.url" in refused.text and "'ftp' is not http or https" in refused.text
