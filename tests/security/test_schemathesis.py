"""Generated requests over every operation of ``/openapi.json``, with security on.

The user ``alice`` has every right but ``secrets`` in namespace ``a``. The
store holds an object of each kind in ``a``, in ``b`` and cluster-wide (all
named ``a``), plus objects in ``a`` and ``b`` whose secret fields hold
``SECRET``. No answer may be a 5xx, name an object outside ``a`` or carry a
secret. Half of the generated namespaces are turned into ``a`` so that
allowed routes are exercised too.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from shoal.api.app import create_app
from shoal.api.auth import Security, protect
from shoal.api.auth.rbac import Rbac
from shoal.api.codec import encode
from shoal.model.registry import KINDS
from shoal.store.sqlite import SqliteStore
from tests.api.samples import CLOUD_CLUSTER, SAMPLES, paths

SECRET = "do-not-leak-this-secret"
_tokens = Path(tempfile.mkdtemp(prefix="shoal-schemathesis-")) / "tokens.csv"
_tokens.write_text("alice-token,alice,alice\n")
_store = SqliteStore(":memory:")
_protection = protect(
    Security(allow_anonymous=False, token_file=_tokens, authorization="RBAC"), _store
)


def _seed() -> None:
    async def run() -> None:
        for sample in SAMPLES:
            kind = next(k for k in KINDS if k.plural == sample.plural)
            namespaces = ("a", "b") if sample.namespaced else (None,)
            for namespace in namespaces:
                body = sample.body("a" if namespace != "b" else "tenantb", namespace)
                text = orjson.dumps(body).replace(b'"token":"t"', f'"token":"{SECRET}"'.encode())
                text = text.replace(b'"password":"p"', f'"password":"{SECRET}"'.encode())
                obj: Any = kind.model_validate_json(text)
                await _protection.store.create(obj.store_key(), encode(obj))

    asyncio.run(run())


_seed()
assert isinstance(_protection.authorizer, Rbac)
_protection.authorizer.set_role(
    "tenant-a",
    {"rules": [{"api": "", "resources": [""], "namespaces": ["a"],
                "verbs": ["create", "list", "list_all", "get", "update", "delete", "watch"]}]},
)  # fmt: skip
_protection.authorizer.set_binding("tenant-a", {"users": ["alice"], "roles": ["tenant-a"]})
_app = create_app(_store, security=_protection)
schema = schemathesis.openapi.from_asgi(
    "/openapi.json", _app, headers={"authorization": "Bearer alice-token"}
)
# Schemathesis' coverage phase (every boundary and wrong value the schema defines, about
# 27,000 requests) runs in tests/api/test_schemathesis.py, where every case reaches the
# handlers. Here the guard answers half of the cases before any handler: the explicit
# examples and the fuzzing phase probe it for leaks, in a tenth of the time.
schema.config.phases.update(phases=["examples", "fuzzing"])
_turn = itertools.count()


def _no_leak(ctx: Any, response: Any, case: schemathesis.Case) -> None:
    text = response.text
    assert SECRET not in text, "a secret field in clear"
    assert "tenantb" not in text, "an object of namespace b"


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_server_errors_no_leaks(case: schemathesis.Case) -> None:
    if case.query:
        case.query.pop("watch", None)
    if case.path_parameters and "namespace" in case.path_parameters and next(_turn) % 2:
        case.path_parameters["namespace"] = "a"
    response = case.call(headers={"authorization": "Bearer alice-token"})
    case.validate_response(response, checks=[not_a_server_error])
    _no_leak(None, response, case)


_TOSCA_WORDS = st.sampled_from(["tosca.nodes.Compute", "site.Compute", "four", "8 GB",
                                "/etc/passwd", "file:/etc/passwd", "http://127.0.0.1:1/x"])
_TOSCA_KEYS = st.sampled_from(["type", "derived_from", "properties", "capabilities", "imports",
                               "repositories", "file", "url", "num_cpus", "node_types"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12) | _TOSCA_WORDS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(_TOSCA_KEYS | st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@pytest.mark.slow
@given(data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_tosca_bodies_no_server_errors_no_leaks(data: st.DataObject) -> None:
    """A cluster's TOSCA template with one node replaced by generated JSON: 2xx or 4xx."""
    body = CLOUD_CLUSTER.body("generated", "a")
    template = body["spec"]["tosca"]
    path = data.draw(st.sampled_from(paths(template)[1:]))
    node = template
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = data.draw(_JSON)
    operation = schema["/kubernetes/namespaces/{namespace}/clusters"]["POST"]
    query = {"dry_run": "true"} if data.draw(st.booleans()) else {}
    case = operation.Case(path_parameters={"namespace": "a"}, body=body, query=query,
                          media_type="application/json")  # fmt: skip
    response = case.call(headers={"authorization": "Bearer alice-token"})
    assert response.status_code < 500, response.text
    assert "root:" not in response.text  # nothing of the API host's files
    _no_leak(None, response, case)
