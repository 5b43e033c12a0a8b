"""Bad input refused at the door: a 422 problem document naming the field, nothing stored."""

from __future__ import annotations

import httpx

from shoal.model.validation.kubeconfig import CredentialPolicy, set_credential_policy
from tests.api.samples import BY_KIND, CLUSTER
from tests.api.validation_cases import CASES, Case
from tests.util import made_by_tests


async def _refused(http: httpx.AsyncClient, case: Case) -> str | None:
    """Why the API's answer to ``case`` is not the expected refusal, or None."""
    sample = BY_KIND[case.kind]
    response = await http.post(sample.collection(), json=case.body())
    if response.status_code != 422:
        return f"{response.status_code} {response.text[:300]}"
    problem = response.json()
    if response.headers["content-type"] != "application/problem+json":
        return f"content type {response.headers['content-type']}"
    fields = [e["field"] for e in problem.get("errors", [])]
    field = case.expected()
    if problem["title"] != "INVALID_RESOURCE" or not any(
        f == field or f.startswith((field + ".", field + "[")) for f in fields
    ):
        return f"{problem['title']}: fields {fields}"
    if fields[0] not in problem["detail"]:
        return f"detail {problem['detail']!r} does not name {fields[0]}"
    if made_by_tests((await http.get(sample.collection())).json()["items"]):
        return "stored anyway"
    return None


async def test_every_wrong_body_is_refused_with_its_field(http: httpx.AsyncClient) -> None:
    """One server for the whole table (the cases are independent: nothing gets stored)."""
    assert len(CASES) >= 40
    assert {c.kind for c in CASES} >= {"Cluster", "Application", "Role", "RoleBinding",
                                       "GlobalMetric", "Metric", "GlobalMetricsProvider"}
    wrong = {case.id: why for case in CASES if (why := await _refused(http, case)) is not None}
    assert wrong == {}


async def test_update_is_held_to_the_same_rules(http: httpx.AsyncClient) -> None:
    body = CLUSTER.body("c1", "default")
    assert (await http.post(CLUSTER.collection(), json=body)).status_code == 200
    body["spec"]["kubeconfig"]["contexts"][0]["context"]["user"] = "ghost"
    response = await http.put(CLUSTER.item("c1"), json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "spec.kubeconfig.contexts[0].context.user"


async def test_several_contexts_are_a_warning_not_a_refusal(http: httpx.AsyncClient) -> None:
    body = CLUSTER.body("multi", "default")
    config = body["spec"]["kubeconfig"]
    config["contexts"].append({"name": "other", "context": {"cluster": "c", "user": "u"}})
    response = await http.post(CLUSTER.collection(), json=body)
    assert response.status_code == 200, response.text
    assert "spec.kubeconfig.contexts" in response.headers["warning"]
    assert response.json()["spec"]["kubeconfig"]["contexts"][1]["name"] == "other"


async def test_a_cluster_to_be_created_needs_tosca_instead(http: httpx.AsyncClient) -> None:
    body = CLUSTER.body("to-build", "default")
    tosca = {"tosca_definitions_version": "tosca_simple_yaml_1_0",
             "topology_template": {"outputs": {"kubeconfig": {"value": "x"}}}}
    body["spec"] = {"kubeconfig": {}, "tosca": tosca}
    response = await http.post(CLUSTER.collection(), json=body)
    assert response.status_code == 200, response.text
    assert response.json()["status"]["state"] == "PENDING"


async def test_a_broken_tosca_template_is_refused_naming_the_field(
    http: httpx.AsyncClient,
) -> None:
    body = CLUSTER.body("broken", "default")
    nodes = {"x": {"type": "tosca.nodes.Nope"}}
    outputs = {"kubeconfig": {"value": "x"}}
    body["spec"] = {"tosca": {"tosca_definitions_version": "tosca_simple_yaml_1_0",
                              "topology_template": {"node_templates": nodes,
                                                    "outputs": outputs}}}  # fmt: skip
    response = await http.post(CLUSTER.collection(), json=body)
    assert response.status_code == 422, response.text
    error = response.json()["errors"][0]
    assert error["field"] == "spec.tosca"
    assert 'Type "tosca.nodes.Nope" is not a valid type' in error["reason"]
    body["spec"] = {"tosca": "https://example.com/cluster.yaml"}
    response = await http.post(CLUSTER.collection(), json=body)
    assert response.status_code == 422, response.text
    assert "SHOAL_TOSCA_URLS" in response.json()["errors"][0]["reason"]
    body["spec"] = {"tosca": {"tosca_definitions_version": "tosca_simple_yaml_1_0"}}
    response = await http.post(CLUSTER.collection(), json=body)
    assert response.status_code == 422, response.text
    error = response.json()["errors"][0]
    assert error["field"] == "spec.tosca.topology_template.outputs.kubeconfig"
    assert error["reason"].startswith("is required")


async def test_exec_credentials_are_refused_unless_allowed(http: httpx.AsyncClient) -> None:
    body = CLUSTER.body("exec", "default")
    user = {"exec": {"command": "aws", "args": ["eks", "get-token"], "apiVersion": "v1"}}
    body["spec"]["kubeconfig"]["users"][0]["user"] = user
    response = await http.post(CLUSTER.collection(), json=body)
    assert response.status_code == 422, response.text
    assert "spec.kubeconfig.users[0].user.exec" in response.text
    set_credential_policy(CredentialPolicy(exec_commands=frozenset({"aws"})))
    try:
        response = await http.post(CLUSTER.collection(), json=body)
    finally:
        set_credential_policy(None)
    assert response.status_code == 200, response.text
    assert response.json()["spec"]["kubeconfig"]["users"][0]["user"] == user


async def test_custom_resources_pass_the_schema_step(http: httpx.AsyncClient) -> None:
    sample = BY_KIND["Application"]
    body = sample.body("crd", "default")
    body["spec"]["manifest"] = [
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
         "spec": {"anything": ["goes", 1]}},
        {"apiVersion": "apps.example.com/v1", "kind": "Deployment", "metadata": {"name": "d"},
         "spec": {"replicas": "many"}},
    ]  # fmt: skip
    response = await http.post(sample.collection(), json=body)
    assert response.status_code == 200, response.text


async def test_dry_run_on_every_write_stores_nothing(http: httpx.AsyncClient) -> None:
    app = BY_KIND["Application"]
    body = app.body("web", "default")
    answer = await http.post(app.collection(), json=body, params={"dry_run": "true"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["metadata"]["name"] == "web"
    assert answer.json()["metadata"]["resource_version"] is None
    assert (await http.get(app.item("web"))).status_code == 404
    bad = app.body("bad", "default")
    bad["spec"]["manifest"] = []
    refused = await http.post(app.collection(), json=bad, params={"dryRun": "All"})
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "spec.manifest"

    created = (await http.post(app.collection(), json=body)).json()
    again = await http.post(app.collection(), json=body, params={"dry_run": "true"})
    assert again.status_code == 409
    changed = {**created, "spec": {**created["spec"], "backoff": 7}}
    answer = await http.put(app.item("web"), json=changed, params={"dryRun": "All"})
    assert answer.status_code == 200 and answer.json()["spec"]["backoff"] == 7
    deleted = await http.delete(app.item("web"), params={"dry_run": "true"})
    assert deleted.status_code == 200 and deleted.json()["metadata"]["deleted"] is not None
    stored = (await http.get(app.item("web"))).json()
    assert stored == created
