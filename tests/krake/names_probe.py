"""Krake 1.0.1's client with Krake's names: its CLI's namespace ``system:admin``, a provider
named ``GlobalInfrastructureProvider_instance``, a Role without rules. Run by Krake's Python 3.8.

    python names_probe.py SHOAL_URL TOKEN MODE KUBECONFIG_JSON

``MODE``: ``tenant`` registers a cluster and creates an application in ``system:admin``
and reads them back; ``admin`` creates the cluster-wide objects. ``TOKEN`` stands in for
the TLS client certificate Krake's deployments authenticate its client with (Krake's
client has no setting for a token: it is put on the client's HTTP session). Prints one
JSON line per call: ``{"call": ..., "ok": true, "result": ...}`` or with ``"error"``.
This file must stay valid Python 3.8: it runs in Krake's virtualenv.
"""

import asyncio
import json
import sys

from krake.client import Client
from krake.client.core import CoreApi
from krake.client.infrastructure import InfrastructureApi
from krake.client.kubernetes import KubernetesApi
from krake.data.core import Role
from krake.data.infrastructure import GlobalInfrastructureProvider
from krake.data.kubernetes import Application, Cluster
from probe_calls import call

NS = "system:admin"  # rok.yaml's default namespace
URL, TOKEN, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
KUBECONFIG = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "echo-demo"},  # no namespace: the context's, as kubectl puts it
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "echo"}},
        "template": {
            "metadata": {"labels": {"app": "echo"}},
            "spec": {"containers": [{"name": "echo", "image": "k8s.gcr.io/echoserver:1.4"}]},
        },
    },
}


def body(cls, data):
    return cls.deserialize(data, creation_ignored=True)


async def tenant(client):
    kube = KubernetesApi(client)
    cluster = body(Cluster, {
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": "minikube", "namespace": NS},
        "spec": {"kubeconfig": KUBECONFIG, "metrics": [], "custom_resources": [],
                 "constraints": {"cloud": {}}},
    })
    await call("create_cluster", kube.create_cluster(body=cluster, namespace=NS),
               lambda c: c.metadata.namespace)
    app = body(Application, {
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": "echo-demo", "namespace": NS},
        "spec": {"manifest": [DEPLOYMENT], "constraints": {"cluster": {}}},
    })
    await call("create_application", kube.create_application(body=app, namespace=NS),
               lambda a: a.metadata.namespace)
    await call("list_applications", kube.list_applications(namespace=NS),
               lambda found: [a.metadata.name for a in found.items])
    await call("read_application", kube.read_application(namespace=NS, name="echo-demo"),
               lambda a: a.metadata.name)


async def admin(client):
    core, infra = CoreApi(client), InfrastructureApi(client)
    role = body(Role, {"api": "core", "kind": "Role", "metadata": {"name": "empty"},
                       "rules": []})
    await call("create_role", core.create_role(body=role), lambda r: r.rules)
    provider = body(GlobalInfrastructureProvider, {
        "api": "infrastructure", "kind": "GlobalInfrastructureProvider",
        "metadata": {"name": "GlobalInfrastructureProvider_instance"},
        "spec": {"type": "im", "im": {"url": "https://im.example:8800",
                                       "username": "u", "password": "p"}},
    })
    await call("create_global_infrastructure_provider",
               infra.create_global_infrastructure_provider(body=provider),
               lambda p: p.metadata.name)
    await call("read_global_infrastructure_provider",
               infra.read_global_infrastructure_provider(
                   name="GlobalInfrastructureProvider_instance"),
               lambda p: p.metadata.name)


async def main():
    async with Client(URL) as client:
        client.session._default_headers["Authorization"] = "Bearer " + TOKEN
        await (tenant(client) if MODE == "tenant" else admin(client))


if __name__ == "__main__":
    asyncio.run(main())
