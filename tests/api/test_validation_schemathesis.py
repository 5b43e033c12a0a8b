"""Generated bodies that ``/openapi.json`` forbids, on every create and batch write: each refused.

Negative generation mode: schemathesis breaks the schema of a body or a
parameter on purpose; the API must answer 4xx (never 2xx, never 5xx), with
dry runs on so that the writes it accepts would not pile up.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import negative_data_rejection, not_a_server_error

from shoal.api.app import create_app
from shoal.client.wire import collection_path
from shoal.model.registry import KINDS
from shoal.store.sqlite import SqliteStore

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(SqliteStore(":memory:")))
schema.config.generation.update(modes=[GenerationMode.NEGATIVE])
# The create of every kind (an update's body has the same schema, and the same rules run).
_PATHS = sorted({collection_path(k, "{namespace}" if k.namespaced else None) for k in KINDS})
# The batch writes: the scheduler's, the fleet scheduler's, the kube controller's and the
# event recorder's.
_BATCHES = [
    "/scheduling/bindings",
    "/scheduling/reschedules",
    "/scheduling/podstatuses",
    "/scheduling/applicationstatuses",
    "/scheduling/applicationfinalizers",
    "/core/events",
    "/kubernetes/applications",
    "/scheduling/pods",
]
_PATHS += _BATCHES
writes = schema.include(method="POST", path=_PATHS)


@pytest.mark.slow
@writes.parametrize()
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_bodies_the_schema_forbids_are_refused(case: schemathesis.Case) -> None:
    # An unknown field is dropped with a Warning by default (as Kubernetes and Krake do);
    # Strict, which Shoal's own client sends, refuses every body the schema forbids.
    case.query = {**(case.query or {}), "fieldValidation": "Strict"}
    case.call_and_validate(checks=[not_a_server_error, negative_data_rejection])
