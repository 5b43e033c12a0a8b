"""Krake's own client creates an application from a TOSCA template, then moves it to a CSAR
archive as rok does; run by Krake's Python 3.8.

    python tosca_probe.py URL NAMESPACE NAME CSAR_URL

One JSON line per step: ``{"step", "manifest": [[kind, name]...], "tosca", "csar"}`` as
Krake's data classes read the answer back. This file must stay valid Python 3.8.
"""

import asyncio
import json
import sys

from krake.client import Client
from krake.client.kubernetes import KubernetesApi
from krake.data.kubernetes import Application

KUBERNETES_OBJECT = "tosca.nodes.indigo.KubernetesObject"


def template(name):
    """A ConfigMap as a Kubernetes object node, its value put in with get_input; the type
    given inline (Krake's client parses the template, and would fetch an import)."""
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  size:"
    return {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        "node_types": {KUBERNETES_OBJECT: {
            "derived_from": "tosca.nodes.Root",
            "properties": {"spec": {"type": "string", "required": True}},
        }},
        "topology_template": {
            "inputs": {"size": {"type": "string", "default": "small"}},
            "node_templates": {"config": {
                "type": KUBERNETES_OBJECT,
                "properties": {"spec": {"concat": [text, {"get_input": "size"}]}},
            }},
        },
    }


def line(step, app):
    print(json.dumps({
        "step": step,
        "manifest": [[obj["kind"], obj["metadata"]["name"]] for obj in app.spec.manifest],
        "tosca": bool(app.spec.tosca),
        "csar": app.spec.csar,
    }), flush=True)


async def main(url, namespace, name, csar_url):
    async with Client(url) as client:
        kube = KubernetesApi(client)
        app = Application.deserialize({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"manifest": [], "tosca": template(name + "-tosca"),
                     "constraints": {"cluster": {}}},
        }, creation_ignored=True)
        created = await kube.create_application(namespace=namespace, body=app)
        line("created", created)
        read = await kube.read_application(namespace=namespace, name=name)
        read.spec.manifest = []  # as rok's "app update --url x.csar" sends it
        read.spec.tosca = {}
        read.spec.csar = csar_url
        updated = await kube.update_application(namespace=namespace, name=name, body=read)
        line("updated", updated)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
