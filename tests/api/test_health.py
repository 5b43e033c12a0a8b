"""Health, readiness, Prometheus metrics and the API description."""

from __future__ import annotations

import httpx

from tests.api.samples import APPLICATION, SAMPLES
from tests.util import SHIPPED_ROLES


async def test_healthz_and_readyz(http: httpx.AsyncClient) -> None:
    response = await http.get("/healthz")
    assert response.status_code == 200 and response.json()["status"] == "ok"
    await http.post(APPLICATION.collection(), json=APPLICATION.body("web", "default"))
    response = await http.get("/readyz")
    assert response.status_code == 200
    # the shipped API's default roles and bindings were written first
    assert response.json() == {"status": "ok", "revision": len(SHIPPED_ROLES) * 2 + 1}


async def test_metrics_count_requests(http: httpx.AsyncClient) -> None:
    await http.get(APPLICATION.item("missing"))
    await http.post(APPLICATION.collection(), json=APPLICATION.body("web", "default"))
    response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    route = "/kubernetes/namespaces/{namespace}/applications"
    assert f'shoal_api_requests_total{{method="POST",route="{route}",status="200"}}' in text
    assert f'shoal_api_requests_total{{method="GET",route="{route}/{{name}}",status="404"}}' in text
    assert "shoal_api_request_seconds_bucket" in text
    assert "shoal_api_watches" in text


async def test_openapi_documents_every_route(http: httpx.AsyncClient) -> None:
    response = await http.get("/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    assert spec["openapi"].startswith("3.")
    paths = spec["paths"]
    for sample in SAMPLES:
        assert sample.collection("{namespace}") in paths, sample.kind
        item = sample.item("{name}", "{namespace}")
        # an application's finalizers alone are set by PATCH (the kube controller's writes)
        patch = {"patch"} if sample.kind == "Application" else set()
        assert set(paths[item]) == {"get", "put", "delete"} | patch, sample.kind
        if sample.namespaced:
            assert sample.collection(None) in paths
        for sub in sample.subresources:
            assert f"{item}/{sub}" in paths, (sample.kind, sub)
    app_item = APPLICATION.item("{name}", "{namespace}")
    for sub in ("complete", "shutdown", "retry"):
        assert f"{app_item}/{sub}" in paths
    assert "/healthz" in paths and "/metrics" in paths


async def test_docs_page(http: httpx.AsyncClient) -> None:
    response = await http.get("/docs")
    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]
    assert "/openapi.json" in response.text
