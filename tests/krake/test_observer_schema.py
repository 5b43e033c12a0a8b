"""Observer schemas against Krake 1.0.1's own code.

Krake's functions run unchanged in its virtualenv (``observer_probe.py``): the
default schema it generates for an object, and whether it accepts a schema, agree
with Shoal's case by case. Krake's client (``observer_client_probe.py``) creates an
application with its custom schema, which Shoal deploys and keeps, and reads back
what Shoal observed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shoal.api.server import ApiServer
from shoal.client.kube import KubeClients
from shoal.client.rest import ShoalClient
from shoal.kube.controller import KubeController
from shoal.model import observer_schema as rules
from shoal.model.base import Metadata, ResourceRef
from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterSpec
from shoal.sim.server import SimServer
from shoal.testing.builders import register
from tests.krake.conftest import run_krake
from tests.model.test_observer_schema import (
    ECHO,
    ECHO_CUSTOM,
    ECHO_DEFAULT,
    SERVICE_LB,
    edited,
)
from tests.util import wait_for

pytestmark = [pytest.mark.integration]

OBJECTS: list[dict[str, Any]] = [
    ECHO,
    SERVICE_LB,
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}},
     "data": {"k": "v"}},
    {"apiVersion": "x/v1", "kind": "Grid", "metadata": {"name": "g"}, "rows": [[1, [2]], []]},
]  # fmt: skip


def _changed(path: str, value: Any, *, drop: bool = False) -> list[dict[str, Any]]:
    """ECHO_CUSTOM with the value at ``path`` changed, as a manifest."""
    return [edited(path, value, drop)]


CONTAINERS = "spec.template.spec.containers"
VALIDATIONS: dict[str, list[Any]] = {
    "custom": [ECHO_CUSTOM],
    "default": [ECHO_DEFAULT],
    "identity-only": [{"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "echo-demo"}}],
    "none": [],
    "value": _changed("spec.replicas", 1),
    "namespace-value": _changed("metadata.namespace", "default"),
    "no-api-version": _changed("apiVersion", None, drop=True),
    "no-kind": _changed("kind", None, drop=True),
    "no-metadata": _changed("metadata", None, drop=True),
    "no-name": _changed("metadata.name", None, drop=True),
    "no-control": _changed(CONTAINERS, [{"name": None}]),
    "control-half": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 1}),
    "min-string": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: "1", rules.MAX_LENGTH: 1}),
    "max-negative": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 0, rules.MAX_LENGTH: -1}),
    "max-below-min": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 2, rules.MAX_LENGTH: 1}),
    "no-maximum": _changed(f"{CONTAINERS}.1", {rules.MIN_LENGTH: 5, rules.MAX_LENGTH: 0}),
    "max-below-elements": _changed(CONTAINERS, [
        {"name": None}, {"name": None}, {rules.MIN_LENGTH: 0, rules.MAX_LENGTH: 1}]),
    "element-value": _changed(f"{CONTAINERS}.0", "echo"),
    "not-in-manifest": _changed("metadata.name", "web"),
    "other-api-version": _changed("apiVersion", "apps/v1beta1"),
}  # fmt: skip


async def test_default_schemas_and_validation_agree_with_krake(krake_python: str) -> None:
    cases = {
        "defaults": OBJECTS,
        "validations": [
            {"id": name, "schema": schema, "manifest": [ECHO]}
            for name, schema in VALIDATIONS.items()
        ],
    }
    lines = await run_krake(krake_python, "observer_probe.py", json.dumps(cases))
    krake_defaults = [line["default"] for line in lines if "default" in line]
    assert krake_defaults == [rules.default_schema(obj) for obj in OBJECTS]

    krake_refuses = {line["id"]: line["refused"] is not None for line in lines if "id" in line}
    shoal_refuses = {
        name: bool(list(rules.problems(schema, [ECHO], "spec.observer_schema")))
        for name, schema in VALIDATIONS.items()
    }
    assert shoal_refuses == krake_refuses
    assert sum(krake_refuses.values()) >= 14  # the table tries refusals, not only passes


async def test_krake_client_application_keeps_only_its_observed_fields(
    open_api: ApiServer, sim: SimServer, krake_python: str
) -> None:
    # Krake's client sends no token (Krake's deployments authenticate it by a TLS client
    # certificate, or run its API open): an open API, as in test_client.py
    ns = "krake"
    async with ShoalClient(open_api.url, token="") as shoal:
        cluster = Cluster(metadata=Metadata(name="de", namespace=ns),
                          spec=ClusterSpec(kubeconfig=sim.clusters.kubeconfig("de")))  # fmt: skip
        await register(shoal, cluster)
        controller = KubeController(shoal, poll_interval=20.0, fallback=20.0, timeout=2.0)
        await controller.start()
        kube = KubeClients(timeout=2.0)
        try:
            lines = await run_krake(krake_python, "observer_client_probe.py", open_api.url, ns,
                                    "create", "echo-demo", json.dumps([ECHO]),
                                    json.dumps([ECHO_CUSTOM]))  # fmt: skip
            assert lines == [{"created": "echo-demo"}]
            app = await shoal.get(Application, "echo-demo", ns)
            await shoal.bind(app, ResourceRef(api="kubernetes", kind="Cluster", namespace=ns,
                                              name="de"))  # fmt: skip

            async def running() -> bool:
                app = await shoal.get(Application, "echo-demo", ns)
                return app.status.state is ApplicationState.RUNNING

            await wait_for(running, timeout=20, message="echo-demo RUNNING")
            # replicas (observed, not in the manifest) scaled on the cluster are put back
            member = await kube.get(await shoal.get(Cluster, "de", ns))
            # the Deployment names no namespace: it runs in the kubeconfig context's, "default"
            path = "/apis/apps/v1/namespaces/default/deployments/echo-demo"
            await member.request("PATCH", path, body={"spec": {"replicas": 3}},
                                 content_type="application/merge-patch+json")

            async def put_back() -> dict[str, object] | None:
                live = await member.request("GET", path)
                return live if live["spec"]["replicas"] == 1 else None

            await wait_for(put_back, timeout=20, message="replicas put back")
            assert controller.drift_repairs >= 1

            (read,) = await run_krake(krake_python, "observer_client_probe.py", open_api.url,
                                      ns, "read", "echo-demo")  # fmt: skip
        finally:
            await kube.close()
            await controller.stop()
    assert read["state"] == "RUNNING"
    assert read["observer_schema"] == [ECHO_CUSTOM]
    assert read["mangled_observer_schema"] == [ECHO_CUSTOM]
    assert read["last_applied_manifest"][0]["spec"]["replicas"] == 1
    observed = read["last_observed_manifest"][0]
    assert observed["spec"]["replicas"] == 1
    assert observed["metadata"] == {"name": "echo-demo", "namespace": "default"}
    assert "image" not in observed["spec"]["template"]["spec"]["containers"][0]
