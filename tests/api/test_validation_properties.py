"""The rules refuse nothing valid: generated valid objects of every kind are accepted,
stored and read back equal; so are every sample body of the suite and the docs' examples."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.api.app import create_app
from shoal.model.registry import kind_for
from shoal.model.validation.roles import VERBS, resources_by_group
from shoal.store.sqlite import SqliteStore
from tests.api.samples import BY_KIND, SAMPLES, Body, Sample

_names = itertools.count()
DNS = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?\Z")
LABEL = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._-]{0,10}[A-Za-z0-9])?\Z")
PREFIX = st.one_of(st.just(""), st.from_regex(r"\A[a-z0-9]{1,8}(\.[a-z0-9]{1,8}){0,2}/\Z"))
LABELS = st.dictionaries(st.builds(str.__add__, PREFIX, LABEL), st.one_of(st.just(""), LABEL),
                         max_size=3)  # fmt: skip
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.fixture(scope="module")
def in_process() -> Iterator[TestClient]:
    with TestClient(create_app(SqliteStore(":memory:"))) as client:
        yield client


def _accepted_and_equal(in_process: TestClient, sample: Sample, body: Body) -> None:
    """POST ``body``; it must be stored as sent (the kind's own fields and labels)."""
    body["metadata"]["name"] = f"p{next(_names)}"
    if sample.namespaced:
        body["metadata"]["namespace"] = "default"
    response = in_process.post(sample.collection(), json=body)
    assert response.status_code == 200, (body, response.text)
    stored = in_process.get(sample.item(body["metadata"]["name"])).json()
    kind = kind_for(sample.api, sample.kind)
    sent = kind.model_validate(copy.deepcopy(body)).model_dump(mode="json")
    for field in (f for f in body if f not in ("metadata", "status")):  # what the user set
        assert stored[field] == sent[field], field
    assert stored["metadata"]["labels"] == body["metadata"].get("labels", {})


# generated bodies of the kinds with rules of their own --------------------------------

KUBECONFIG_USERS = st.sampled_from([
    {"token": "t"},
    {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"},
    {"username": "u", "password": "p"},
])  # fmt: skip


@st.composite
def clusters(draw: Any) -> Body:
    names = draw(st.lists(DNS, min_size=1, max_size=3, unique=True))
    current = draw(st.sampled_from(names))
    server = draw(st.sampled_from(["https://10.0.0.1:6443", "http://kube.example", "https://h"]))
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": server}} for n in names],
        "users": [{"name": f"{n}-u", "user": draw(KUBECONFIG_USERS)} for n in names],
        "contexts": [{"name": n, "context": {"cluster": n, "user": f"{n}-u"}} for n in names],
    }
    if len(names) > 1 or draw(st.booleans()):
        config["current-context"] = current
    metrics = [{"name": n, "weight": 1.0} for n in draw(st.lists(DNS, max_size=2, unique=True))]
    return {"api": "kubernetes", "kind": "Cluster", "metadata": {"labels": draw(LABELS)},
            "spec": {"kubeconfig": config, "metrics": metrics}}  # fmt: skip


def _deployment(name: str, replicas: int, labels: dict[str, str]) -> Body:
    selector = {"app": name}
    pod = {"metadata": {"labels": selector}, "spec": {"containers": [{"name": "c", "image": "n"}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": pod}}  # fmt: skip


@st.composite
def manifest_items(draw: Any) -> Body:
    name = draw(DNS)
    labels = draw(LABELS)
    return draw(st.sampled_from([
        _deployment(name, draw(st.integers(0, 50)), labels),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
         "spec": {"ports": [{"port": draw(st.integers(1, 65535))}], "selector": {"app": name}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
         "data": draw(st.dictionaries(LABEL, st.text(max_size=10), max_size=2))},
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
         "spec": {"anything": draw(st.integers())}},
    ]))  # fmt: skip


@st.composite
def applications(draw: Any) -> Body:
    items = draw(st.lists(manifest_items(), min_size=1, max_size=4,
                          unique_by=lambda i: (i["kind"], i["metadata"]["name"])))  # fmt: skip
    return {"api": "kubernetes", "kind": "Application", "metadata": {"labels": draw(LABELS)},
            "spec": {"manifest": items}}  # fmt: skip


@st.composite
def roles(draw: Any) -> Body:
    known = resources_by_group()
    rules = []
    for _ in range(draw(st.integers(1, 3))):
        api = draw(st.sampled_from(["*", *sorted(known)]))
        pool = sorted(set().union(*known.values())) if api == "*" else sorted(known[api])
        some = st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True)
        resources = draw(st.one_of(st.just(["*"]), some))
        verbs = draw(st.one_of(st.just(["*"]), st.lists(st.sampled_from(VERBS), min_size=1)))
        namespaces = draw(st.lists(DNS, max_size=2))
        rules.append({"api": api, "resources": resources, "namespaces": namespaces,
                      "verbs": verbs})  # fmt: skip
    return {"api": "core", "kind": "Role", "metadata": {}, "rules": rules}


@st.composite
def metrics(draw: Any) -> Body:
    low = draw(st.floats(-1e6, 1e6, allow_nan=False))
    high = low + draw(st.floats(1e-3, 1e6, allow_nan=False))
    provider = {"name": draw(DNS), "metric": draw(st.text(min_size=1, max_size=20).filter(
        lambda t: t.strip() and t.isprintable()))}  # fmt: skip
    kind = draw(st.sampled_from(["GlobalMetric", "Metric"]))
    return {"api": "core", "kind": kind, "metadata": {},
            "spec": {"min": low, "max": high, "provider": provider}}  # fmt: skip


SLOW = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))  # fmt: skip


@SLOW
@given(st.one_of(clusters(), applications(), roles(), metrics()))
def test_generated_valid_objects_are_accepted_and_read_back_equal(
    in_process: TestClient, body: Body
) -> None:
    _accepted_and_equal(in_process, BY_KIND[body["kind"]], body)


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.kind for s in SAMPLES])
def test_every_sample_body_of_the_suite_is_accepted(in_process: TestClient, sample: Sample) -> None:
    namespace = "default" if sample.namespaced else None
    _accepted_and_equal(in_process, sample, sample.body("x", namespace, tier="web"))


def test_the_docs_examples_are_accepted(in_process: TestClient) -> None:
    """Manifests as an application's, TOSCA templates (``*.tosca.yaml``) as a cluster's."""
    for path in sorted(EXAMPLES.glob("*.yaml")):
        items = [d for d in yaml.safe_load_all(path.read_text()) if d]
        if path.name.endswith(".tosca.yaml"):
            body = BY_KIND["Cluster"].body("x", "default")
            body["spec"] = {"tosca": items[0],
                            "constraints": {"cloud": {"labels": ["location is DE"]}}}  # fmt: skip
            _accepted_and_equal(in_process, BY_KIND["Cluster"], body)
            continue
        body = BY_KIND["Application"].body("x", "default")
        body["spec"]["manifest"] = items
        _accepted_and_equal(in_process, BY_KIND["Application"], body)
