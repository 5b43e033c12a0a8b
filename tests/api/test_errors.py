"""Bad input of every kind gets a 4xx problem document naming the field, never a 500."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from shoal.api.server import ApiServer
from shoal.testing import shipped
from tests.api.samples import APPLICATION, BY_KIND, CLUSTER, KUBECONFIG

METRIC = BY_KIND["GlobalMetric"]
PROVIDER = BY_KIND["GlobalMetricsProvider"]


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: Any = None  # JSON-able, or bytes sent as they are
    status: int | tuple[int, ...] = 422
    field: str | None = None  # must appear in detail
    headers: dict[str, str] | None = None


def app_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = APPLICATION.body("web", "default")
    change(body)
    return body


def nested(depth: int) -> bytes:
    """An application whose manifest holds ``depth`` nested lists (too deep for json.dumps)."""
    body = json.dumps(app_with(lambda b: b["spec"]["manifest"][0].update(spec="@@"))).encode()
    return body.replace(b'"@@"', b"[" * depth + b"1" + b"]" * depth)


def metric(**spec: Any) -> dict[str, Any]:
    body = METRIC.body("m")
    body["spec"].update(spec)
    return body


def cluster_with(spec: dict[str, Any]) -> dict[str, Any]:
    return {**CLUSTER.body("c", "default"), "spec": spec}


def provider_with(spec: dict[str, Any]) -> dict[str, Any]:
    return {**PROVIDER.body("p"), "spec": spec}


APPS = APPLICATION.collection()
CLUSTERS = CLUSTER.collection()
STRICT = "?fieldValidation=Strict"  # unknown fields refused, as Shoal's own CLI asks

CASES = [
    # malformed bodies
    Case("malformed json", "POST", APPS, b'{"api": "kubernetes",', 400, "body"),
    Case("not utf-8", "POST", APPS, b'{"api": "\xff\xfe"}', 400, "body"),
    Case("empty body", "POST", APPS, b"", (400, 422), "body"),
    Case("array body", "POST", APPS, [1, 2], (400, 422), "body"),
    Case("string body", "POST", APPS, "hello", (400, 422), "body"),
    Case("null body", "POST", APPS, b"null", (400, 422), "body"),
    Case("text content type", "POST", APPS, b"api=kubernetes", (400, 415, 422), "body",
         {"content-type": "text/plain"}),
    Case("trailing garbage", "POST", APPS, b'{"api": "kubernetes"} x', 400, "body"),
    # wrong types
    Case("wrong type backoff", "POST", APPS, app_with(lambda b: b["spec"].update(backoff="x")),
         field="spec.backoff"),
    Case("wrong type manifest", "POST", APPS, app_with(lambda b: b["spec"].update(manifest={})),
         field="spec.manifest"),
    Case("wrong type labels", "POST", APPS, app_with(lambda b: b["metadata"].update(labels=["a"])),
         field="metadata.labels"),
    Case("bool as int", "POST", APPS, app_with(lambda b: b["spec"].update(backoff_limit=-5)),
         field="spec.backoff_limit"),
    Case("manifest item without kind", "POST", APPS,
         app_with(lambda b: b["spec"].update(manifest=[{"apiVersion": "v1", "metadata": {}}])),
         field="spec.manifest"),
    Case("missing spec", "POST", APPS,
         {"api": "kubernetes", "kind": "Application", "metadata": {"name": "x"}}, field="spec"),
    Case("missing metadata", "POST", APPS,
         {"api": "kubernetes", "kind": "Application", "spec": {}}, field="metadata"),
    Case("wrong kind", "POST", APPS, app_with(lambda b: b.update(kind="Cluster")), field="kind"),
    Case("wrong api", "POST", APPS, app_with(lambda b: b.update(api="core")), field="api"),
    # names
    Case("bad name", "POST", APPS, app_with(lambda b: b["metadata"].update(name="Bad Name!")),
         field="metadata.name"),
    Case("long name", "POST", APPS, app_with(lambda b: b["metadata"].update(name="a" * 256)),
         field="metadata.name"),
    Case("empty name", "POST", APPS, app_with(lambda b: b["metadata"].update(name="")),
         field="metadata.name"),
    Case("bad label key", "POST", APPS,
         app_with(lambda b: b["metadata"].update(labels={"-x": "1"})), field="metadata.labels"),
    Case("bad label value", "POST", APPS,
         app_with(lambda b: b["metadata"].update(labels={"x": "a b"})), field="metadata.labels"),
    Case("bad finalizer", "POST", APPS,
         app_with(lambda b: b["metadata"].update(finalizers=["no spaces"])),
         field="metadata.finalizers"),
    # a read of a name nothing can have finds nothing (Krake's controllers rely on the 404);
    # a write with such a name is refused, naming it
    Case("bad name in url", "GET", "/kubernetes/namespaces/default/applications/-bad", None,
         404, "name"),
    Case("bad namespace in url", "GET", "/kubernetes/namespaces/NS!/applications", None, 404,
         "namespace"),
    Case("bad name in url, written", "PUT",
         "/kubernetes/namespaces/default/applications/-bad", APPLICATION.body("web", "default"),
         422, "name"),
    # constraints
    Case("unparsable label constraint", "POST", APPS,
         app_with(lambda b: b["spec"]["constraints"]["cluster"].update(labels=["location is"])),
         field="spec.constraints.cluster.labels"),
    Case("unparsable metric constraint", "POST", APPS,
         app_with(lambda b: b["spec"]["constraints"]["cluster"].update(metrics=["load <<< 1"])),
         field="spec.constraints.cluster.metrics"),
    Case("bad custom resource", "POST", APPS,
         app_with(
             lambda b: b["spec"]["constraints"]["cluster"].update(custom_resources=["nodots"])
         ),
         field="spec.constraints.cluster.custom_resources"),
    # clusters
    Case("kubeconfig with two contexts", "POST", CLUSTERS,
         cluster_with(
             {"kubeconfig": {**KUBECONFIG, "contexts": KUBECONFIG["contexts"] * 2}}
         ),
         field="spec.kubeconfig"),
    Case("kubeconfig without server", "POST", CLUSTERS,
         cluster_with(
             {"kubeconfig": {**KUBECONFIG, "clusters": [{"name": "c", "cluster": {}}]}}
         ),
         field="spec.kubeconfig"),
    Case("kubeconfig not an object", "POST", CLUSTERS,
         cluster_with({"kubeconfig": "apiVersion: v1"}),
         field="spec.kubeconfig"),
    Case("metric listed twice", "POST", CLUSTERS,
         cluster_with(
             {"metrics": [{"name": "m", "weight": 1}, {"name": "m", "weight": 2}]}
         ),
         field="spec.metrics"),
    Case("negative metric weight", "POST", CLUSTERS,
         cluster_with({"metrics": [{"name": "m", "weight": -1}]}),
         field="spec.metrics"),
    # metrics and providers
    Case("metric min == max", "POST", METRIC.collection(), metric(min=1, max=1), field="spec"),
    Case("metric min > max", "POST", METRIC.collection(), metric(min=2, max=1), field="spec"),
    Case("metric min NaN", "POST", METRIC.collection(), b"", 400, "body"),
    Case("metric max infinite", "POST", METRIC.collection(), b"", 400, "body"),
    Case("metric allowed NaN", "POST", METRIC.collection(), b"", 400, "body"),
    Case("metric max overflows", "POST", METRIC.collection(),
         json.dumps(metric(min=0, max=7)).replace('"max": 7', '"max": 1e400').encode(), 400,
         "body"),
    Case("huge resource_version", "PUT", APPS + "/web/binding",
         b'{"cluster": {"api": "kubernetes", "kind": "Cluster", "name": "c"}, '
         b'"resource_version": 123456789012345678901234567890}',
         (409, 422)),
    Case("provider type without section", "POST", PROVIDER.collection(),
         provider_with({"type": "prometheus"}), field="spec"),
    Case("provider two sections", "POST", PROVIDER.collection(),
         provider_with(
             {"type": "static", "static": {"metrics": {}}, "prometheus": {"url": "http://p"}}
         ),
         field="spec"),
    Case("provider unknown type", "POST", PROVIDER.collection(),
         provider_with({"type": "graphite"}), field="spec.type"),
    Case("provider bad url", "POST", PROVIDER.collection(),
         provider_with({"type": "prometheus", "prometheus": {"url": "ftp://x"}}),
         field="spec.prometheus.url"),
    Case("influx 2 without token", "POST", PROVIDER.collection(),
         provider_with({"type": "influx", "influx": {"url": "http://i"}}),
         field="spec.influx"),
    # unknown fields, refused when asked (by default they are dropped with a warning)
    Case("unknown top-level field", "POST", APPS + STRICT,
         app_with(lambda b: b.update(extra=1)), field="extra"),
    Case("unknown metadata field", "POST", APPS + STRICT,
         app_with(lambda b: b["metadata"].update(colour="red")), field="metadata.colour"),
    Case("unknown spec field", "POST", APPS + STRICT,
         app_with(lambda b: b["spec"].update(replicas=3)), field="spec.replicas"),
    Case("unknown field validation", "POST", APPS + "?fieldValidation=strict",
         APPLICATION.body("web", "default"), field="fieldValidation"),
    # huge and deep
    Case("huge body", "POST", APPS, b'{"x": "' + b"a" * (8 * 1024 * 1024 + 10) + b'"}', 413,
         "body"),
    Case("deeply nested manifest", "POST", APPS, nested(100_000), (200, 201, 400, 413, 422)),
    # list parameters
    Case("limit zero", "GET", APPS + "?limit=0", None, 422, "limit"),
    Case("limit text", "GET", APPS + "?limit=ten", None, 422, "limit"),
    Case("bad selector", "GET", APPS + "?label_selector=a%20in%20(", None, 400, "label_selector"),
    Case("bad continue", "GET", APPS + "?limit=1&continue=%%%", None, 400, "continue"),
    # subresource bodies
    Case("binding without cluster", "PUT", APPS + "/web/binding", {}, field="cluster"),
    Case("binding with bad ref", "PUT", APPS + "/web/binding", {"cluster": {"name": "x"}},
         field="cluster"),
    Case("binding bad resource_version", "PUT", APPS + "/web/binding",
         {"cluster": {"api": "kubernetes", "kind": "Cluster", "name": "c"},
          "resource_version": "new"},
         field="resource_version"),
    Case("binding unknown field", "PUT", APPS + "/web/binding" + STRICT,
         {"cluster": {"api": "kubernetes", "kind": "Cluster", "name": "c"}, "when": "now"},
         field="when"),
    Case("complete with int token", "PUT", APPS + "/web/complete", {"token": 5}, field="token"),
    Case("cluster binding without cloud", "PUT", CLUSTERS + "/c/binding", {}, field="cloud"),
    # routing
    Case("unknown route", "GET", "/kubernetes/namespaces/default/widgets", None, 404),
    Case("method not allowed", "PATCH", CLUSTERS + "/c", {}, 405),
    Case("unknown object", "GET", APPS + "/nope", None, 404, "nope"),
]  # fmt: skip


def _nan_bodies() -> None:
    for case in CASES:
        if case.name == "metric min NaN":
            case.body = json.dumps(metric(min=float("nan"), max=1)).encode()
        elif case.name == "metric max infinite":
            case.body = json.dumps(metric(min=0, max=float("inf"))).encode()
        elif case.name == "metric allowed NaN":
            case.body = json.dumps(metric(allowed_values=[float("nan")])).encode()


_nan_bodies()


async def _send(http: httpx.AsyncClient, case: Case) -> httpx.Response:
    headers = {"content-type": "application/json", **(case.headers or {})}
    if isinstance(case.body, bytes):
        content = case.body
    elif case.body is None:
        content = None
    else:
        content = json.dumps(case.body).encode()
    return await http.request(case.method, case.path, content=content, headers=headers)


def _check(case: Case, response: httpx.Response) -> str | None:
    """What is wrong with the answer to ``case``, or None."""
    expected = case.status if isinstance(case.status, tuple) else (case.status,)
    if response.status_code not in expected:
        return f"status {response.status_code}, expected {expected}: {response.text[:300]}"
    if response.status_code < 400:
        return None
    if not response.headers.get("content-type", "").startswith("application/problem+json"):
        return f"content-type {response.headers.get('content-type')}"
    problem = response.json()
    for key in ("type", "title", "status", "detail"):
        if key not in problem:
            return f"problem without {key}: {problem}"
    if problem["status"] != response.status_code:
        return f"problem status {problem['status']} != {response.status_code}"
    if case.field is not None and case.field not in problem["detail"]:
        return f"detail does not name {case.field!r}: {problem['detail']}"
    return None


async def _failures(http: httpx.AsyncClient, cases: list[Case]) -> list[str]:
    """What is wrong with each case's answer, as ``name: reason`` lines."""
    failures = []
    for case in cases:
        message = _check(case, await _send(http, case))
        if message:
            failures.append(f"{case.name}: {message}")
    return failures


async def test_bad_input_gets_a_problem_document(http: httpx.AsyncClient) -> None:
    await http.post(APPS, json=APPLICATION.body("web", "default"))
    await http.post(CLUSTERS, json=CLUSTER.body("c", "default"))
    failures = await _failures(http, CASES)
    assert not failures, "\n".join(failures)


async def test_bad_status_updates(http: httpx.AsyncClient) -> None:
    app = (await http.post(APPS, json=APPLICATION.body("web", "default"))).json()
    cluster = (await http.post(CLUSTERS, json=CLUSTER.body("c", "default"))).json()
    cases = []

    def status_case(
        name: str,
        obj: dict[str, Any],
        path: str,
        field: str,
        change: Callable[[dict[str, Any]], None],
    ) -> None:
        body = copy.deepcopy(obj)
        change(body)
        cases.append(Case(name, "PUT", path, body, 422, field))

    status_case(
        "app state NOPE",
        app,
        APPS + "/web/status",
        "status.state",
        lambda b: b["status"].update(state="NOPE"),
    )
    status_case(
        "app reason NOPE",
        app,
        APPS + "/web/status",
        "status.reason.code",
        lambda b: b["status"].update(reason={"code": "NOPE", "message": ""}),
    )
    status_case(
        "app reason 999",
        app,
        APPS + "/web/status",
        "status.reason.code",
        lambda b: b["status"].update(reason={"code": 999, "message": ""}),
    )
    status_case(
        "app state lowercase",
        app,
        APPS + "/web/status",
        "status.state",
        lambda b: b["status"].update(state="running"),
    )
    status_case(
        "app status unknown field",
        app,
        APPS + "/web/status" + STRICT,
        "status.mood",
        lambda b: b["status"].update(mood="happy"),
    )
    status_case(
        "cluster state NOPE",
        cluster,
        CLUSTERS + "/c/status",
        "status.state",
        lambda b: b["status"].update(state="NOPE"),
    )
    status_case(
        "cluster metrics reason NOPE",
        cluster,
        CLUSTERS + "/c/status",
        "status.metrics_reasons",
        lambda b: b["status"].update(metrics_reasons={"m": {"code": "NOPE"}}),
    )
    status_case(
        "status name mismatch",
        app,
        APPS + "/web/status",
        "metadata.name",
        lambda b: b["metadata"].update(name="other"),
    )
    failures = await _failures(http, cases)
    assert not failures, "\n".join(failures)
    # nothing of that was applied
    assert (await http.get(APPS + "/web")).json() == app


async def test_errors_never_leak_a_traceback(http: httpx.AsyncClient, api: ApiServer) -> None:
    response = await http.post(APPS, content=b"{", headers={"content-type": "application/json"})
    assert "Traceback" not in response.text
    assert response.json()["type"].startswith("urn:shoal:problem:")


async def test_huge_chunked_body_is_413(http: httpx.AsyncClient) -> None:
    async def chunks() -> Any:
        yield b'{"api": "kubernetes", "kind": "Application", "x": "'
        for _ in range(9):
            yield b"a" * (1024 * 1024)
        yield b'"}'

    response = await http.post(APPS, content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in response.request.headers
    assert response.status_code == 413, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "body" in response.json()["detail"]


async def test_an_unhandled_error_is_a_500_that_keeps_the_connection() -> None:
    """The problem document, and the next request served on the same connection."""
    from shoal.api.server import start_api
    from shoal.store.sqlite import SqliteStore

    class Failing(SqliteStore):
        async def get(self, key: str) -> Any:
            if key.endswith("/boom"):
                raise RuntimeError("the disk is on fire")
            return await super().get(key)

    server = await start_api(Failing(":memory:"), security=shipped.security())
    try:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        admin = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
        async with httpx.AsyncClient(base_url=server.url, limits=limits, headers=admin) as http:
            failed = await http.get("/kubernetes/namespaces/default/applications/boom")
            assert failed.status_code == 500
            assert failed.json()["title"] == "INTERNAL_ERROR"
            assert "fire" not in failed.text  # no internals in the answer
            first = failed.extensions["network_stream"].get_extra_info("client_addr")
            served = await http.get("/healthz")
            assert served.status_code == 200
            assert served.extensions["network_stream"].get_extra_info("client_addr") == first
    finally:
        await server.stop()
