"""Documents on Krake's routes as Krake gives them, on the API `shoal up` ships.

A polymorphic spec carries only its own section; Shoal's additions are left out
while empty; a PUT that changes nothing is Krake's 400; fields the kind does not
have are dropped with a Warning (refused under ``?fieldValidation=Strict``); and
constraints read back as they were written.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from shoal.api.server import ApiServer
from shoal.client.rest import Invalid, NotFound, ShoalClient
from shoal.model.kubernetes import Application
from shoal.testing import shipped
from tests.api.samples import APPLICATION, BY_KIND, CLUSTER
from tests.conftest import Tenant

APPS = APPLICATION.collection()
PROVIDERS = BY_KIND["GlobalMetricsProvider"].collection()
METRICS = BY_KIND["GlobalMetric"].collection()
IM_PROVIDERS = BY_KIND["GlobalInfrastructureProvider"].collection()
CLOUDS = BY_KIND["Cloud"].collection()
STRICT = {"fieldValidation": "Strict"}


async def _created(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(path, json=body)
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


async def test_a_metrics_provider_reads_back_with_its_own_section_only(
    http: httpx.AsyncClient,
) -> None:
    for name, spec in (
        ("prom", {"type": "prometheus", "prometheus": {"url": "https://prometheus.example"}}),
        ("fixed", {"type": "static", "static": {"metrics": {"load": 0.5}}}),
        ("kafka", {"type": "kafka", "kafka": {"url": "https://ksql.example", "table": "t",
                                              "comparison_column": "c", "value_column": "v"}}),
    ):  # fmt: skip
        body = {"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": name},
                "spec": spec}  # fmt: skip
        created = await _created(http, PROVIDERS, body)
        read = (await http.get(f"{PROVIDERS}/{name}")).json()
        for document in (created, read):
            assert document["spec"] == spec, document
            assert "status" not in document  # the provider's health: nothing yet
        listed = (await http.get(PROVIDERS)).json()["items"]
        assert [i["spec"] for i in listed if i["metadata"]["name"] == name] == [spec]


async def test_an_infrastructure_provider_and_a_cloud_read_back_as_krake_writes_them(
    http: httpx.AsyncClient,
) -> None:
    im = {"type": "im", "im": {"url": "https://im.example:8800", "username": "u",
                               "password": "p", "token": None}}  # fmt: skip
    body = {"api": "infrastructure", "kind": "GlobalInfrastructureProvider",
            "metadata": {"name": "im"}, "spec": im}  # fmt: skip
    created = await _created(http, IM_PROVIDERS, body)
    assert set(created["spec"]) == {"type", "im"}  # no "sim": null
    assert set(created["spec"]["im"]) == {"url", "username", "password", "token"}  # no clouds
    assert created["spec"]["im"]["token"] is None  # Krake's own field keeps its null


async def test_a_metric_reads_back_without_shoal_s_empty_allowed_values(
    http: httpx.AsyncClient,
) -> None:
    spec = {"min": 0, "max": 1, "provider": {"name": "prom", "metric": "load"}}
    body = {"api": "core", "kind": "GlobalMetric", "metadata": {"name": "load"}, "spec": spec}
    created = await _created(http, METRICS, body)
    assert created["spec"] == spec
    assert "inherit_labels" not in created["metadata"]
    body = {**body, "metadata": {"name": "level"},
            "spec": {**spec, "max": 10, "allowed_values": [1, 5, 10]}}  # fmt: skip
    assert (await _created(http, METRICS, body))["spec"]["allowed_values"] == [1, 5, 10]


async def test_an_application_s_shoal_fields_appear_once_set_and_go_again(
    http: httpx.AsyncClient,
) -> None:
    created = await _created(http, APPS, APPLICATION.body("web", "default"))
    for absent in ("retry_limit", "retry_delay", "conflict_resolution", "placement"):
        assert absent not in created["spec"], absent
    for absent in ("placements", "copies", "conditions", "scheduling", "deploy_state",
                   "schedule_reason", "scheduler_attempts", "next_retry"):  # fmt: skip
        assert absent not in created["status"], absent
    assert created["status"]["state"] == "PENDING"  # Krake's own fields stay, null or not
    assert created["status"]["scheduled_to"] is None
    # a binding writes Shoal's bookkeeping: what holds something shows, the rest stays out
    await _created(http, CLUSTER.collection(), CLUSTER.body("c", "default"))
    ref = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "c"}
    response = await http.put(f"{APPS}/web/binding", json={"cluster": ref})
    assert response.status_code == 200, response.text
    status = response.json()["status"]
    assert status["scheduled_to"] == ref and status["last_scheduled_to"] == ref
    for absent in ("schedule_reason", "scheduler_retries", "scheduler_attempts", "next_retry"):
        assert absent not in status, absent
    # a status patch back to a default leaves the field out again
    patch = {"status": {"deploy_state": "RUNNING"}}
    patched = (await http.patch(f"{APPS}/web/status", json=patch)).json()["status"]
    assert patched["deploy_state"] == "RUNNING"
    patch = {"status": {"deploy_state": None}}
    patched = (await http.patch(f"{APPS}/web/status", json=patch)).json()["status"]
    assert "deploy_state" not in patched


async def test_an_update_that_changes_nothing_is_krake_s_400(
    http: httpx.AsyncClient, client: ShoalClient
) -> None:
    created = await _created(http, APPS, APPLICATION.body("web", "default"))
    response = await http.put(f"{APPS}/web", json=created)
    assert response.status_code == 400, response.text
    assert response.json()["title"] == "UPDATE_ERROR"
    assert response.json()["detail"] == "The body contained no update."
    dry = await http.put(f"{APPS}/web", json=created, params={"dry_run": "true"})
    assert dry.status_code == 400
    after = (await http.get(f"{APPS}/web")).json()
    assert after["metadata"]["resource_version"] == created["metadata"]["resource_version"]
    # Shoal's own client answers the object as stored: nothing for its callers to tell apart
    app = await client.get(Application, "web", "default")
    same = await client.update(app)
    assert same.metadata.resource_version == app.metadata.resource_version
    # a Shoal kind answers as Kubernetes does
    lease = {"api": "core", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"duration": 5}}
    lease = await _created(http, "/core/leases", lease)
    response = await http.put("/core/leases/l", json=lease)
    assert response.status_code == 200, response.text


async def test_unknown_fields_are_dropped_with_a_warning_unless_strict(
    http: httpx.AsyncClient,
) -> None:
    body = APPLICATION.body("web", "default")
    body["spec"]["foo"] = 1
    body["metadata"]["password"] = "secret"
    strict = await http.post(APPS, json=body, params=STRICT)
    assert strict.status_code == 422, strict.text
    fields = sorted(e["field"] for e in strict.json()["errors"])
    assert fields == ["metadata.password", "spec.foo"]
    assert (await http.get(f"{APPS}/web")).status_code == 404
    bad = await http.post(APPS, json=body, params={"fieldValidation": "Loose"})
    assert bad.status_code == 422 and "fieldValidation" in bad.text, bad.text

    created = await http.post(APPS, json=body)  # Warn, the default
    assert created.status_code in (200, 201), created.text
    assert created.headers.get_list("warning") == [
        '299 - "unknown field \\"metadata.password\\""',
        '299 - "unknown field \\"spec.foo\\""',
    ]
    assert "foo" not in created.json()["spec"]
    assert "password" not in created.json()["metadata"]

    update = created.json()
    update["spec"]["manifest"][0]["spec"]["replicas"] = 2
    update["spec"]["bar"] = {"deep": True}
    ignored = await http.put(f"{APPS}/web", json=update, params={"fieldValidation": "Ignore"})
    assert ignored.status_code == 200, ignored.text
    assert "warning" not in ignored.headers
    assert ignored.json()["spec"]["manifest"][0]["spec"]["replicas"] == 2


async def test_a_krake_cloud_update_with_password_in_metadata_succeeds(
    http: httpx.AsyncClient,
) -> None:
    """``rok infra cloud update --password`` puts the password in ``metadata``; Krake's API
    drops the field, and so does Shoal's."""
    im = {"type": "im", "im": {"url": "https://im.example:8800", "token": "t"}}
    body = {"api": "infrastructure", "kind": "GlobalInfrastructureProvider",
            "metadata": {"name": "im"}, "spec": im}  # fmt: skip
    await _created(http, IM_PROVIDERS, body)
    cloud = BY_KIND["Cloud"].body("os", "default")
    cloud["spec"]["openstack"]["infrastructure_provider"] = {"name": "im"}
    created = await _created(http, CLOUDS, cloud)
    update = dict(created)
    update["metadata"] = {**created["metadata"], "password": "pass"}
    update["spec"]["openstack"]["url"] = "https://keystone2.example:5000/v3"
    response = await http.put(f"{CLOUDS}/os", json=update)
    assert response.status_code == 200, response.text
    assert response.json()["spec"]["openstack"]["url"] == "https://keystone2.example:5000/v3"
    assert response.headers["warning"] == '299 - "unknown field \\"metadata.password\\""'
    again = (await http.get(f"{CLOUDS}/os")).json()  # rok reads, then sends it back
    again["metadata"]["password"] = "pass"
    response = await http.put(f"{CLOUDS}/os", json=again)  # the same URL: nothing new
    assert response.status_code == 400, response.text
    assert response.json()["detail"] == "The body contained no update."


async def test_a_field_a_tenant_may_not_write_stays_refused_beside_unknown_ones(
    api: ApiServer, http: httpx.AsyncClient, tenant: Tenant
) -> None:
    """Only fields the schema lacks are dropped: a controller's status field is refused."""
    await tenant("alice", "a")
    await _created(http, APPLICATION.collection("a"), APPLICATION.body("web", "a"))
    headers = {"authorization": f"Bearer {shipped.token('alice')}"}
    async with httpx.AsyncClient(base_url=api.url, headers=headers, timeout=30) as alice:
        app = (await alice.get(APPLICATION.item("web", "a"))).json()
        body = {**app, "status": {**app["status"], "running_on": app["status"]["scheduled_to"],
                                  "deploy_state": "RUNNING", "mood": "happy"}}  # fmt: skip
        response = await alice.put(APPLICATION.item("web", "a") + "/status", json=body)
        assert response.status_code == 403, response.text
        assert "status.deploy_state" in response.text
        patch = {"status": {"deploy_state": "RUNNING", "mood": "happy"}}
        response = await alice.patch(APPLICATION.item("web", "a") + "/status", json=patch)
        assert response.status_code in (403, 422), response.text
    stored = (await http.get(APPLICATION.item("web", "a"))).json()
    assert "deploy_state" not in stored["status"]


async def test_constraints_read_back_as_written(http: httpx.AsyncClient) -> None:
    body = APPLICATION.body("web", "default")
    body["spec"]["constraints"]["cluster"] = {
        "labels": ["location=DE", "zone in (a,b)"],
        "metrics": ["load=5", "heat<0.5"],
        "custom_resources": [],
    }
    created = await _created(http, APPS, body)
    assert created["spec"]["constraints"]["cluster"]["labels"] == ["location=DE", "zone in (a,b)"]
    assert created["spec"]["constraints"]["cluster"]["metrics"] == ["load=5", "heat<0.5"]
    cluster = CLUSTER.body("c", "default")
    cluster["spec"]["constraints"] = {"cloud": {"labels": ["location != FR"], "metrics": []}}
    made = await _created(http, CLUSTER.collection(), cluster)
    assert made["spec"]["constraints"]["cloud"]["labels"] == ["location != FR"]
    body = APPLICATION.body("bad", "default")
    body["spec"]["constraints"]["cluster"]["labels"] = ["location=="]
    response = await http.post(APPS, json=body)
    assert response.status_code == 422, response.text
    assert "spec.constraints.cluster.labels[0]" in response.text


async def test_shoal_s_own_client_is_strict(client: ShoalClient) -> None:
    """What Shoal's client (its CLI, its components) sends is Shoal's schema: a field that
    is not there is a mistake, refused rather than dropped."""
    body = APPLICATION.body("web", "default")
    body["spec"]["replica"] = 3
    with pytest.raises(Invalid) as refused:
        await client.request("POST", APPS, body=body)
    assert refused.value.problem["errors"][0]["field"] == "spec.replica"
    with pytest.raises(NotFound):
        await client.get(Application, "web", "default")
