"""Krake's own client creates or reads an application with an observer schema; run by
Krake's Python 3.8.

    python observer_client_probe.py URL NAMESPACE create NAME MANIFEST_JSON SCHEMA_JSON
    python observer_client_probe.py URL NAMESPACE read NAME

``create`` builds the application with Krake's data classes (which check the schema
as Krake does) and prints ``{"created": name}``; ``read`` prints its state and the
status fields Krake keeps for the observer schema, read through Krake's classes.
This file must stay valid Python 3.8: it runs in Krake's virtualenv.
"""

import asyncio
import json
import sys

from krake.client import Client
from krake.client.kubernetes import KubernetesApi
from krake.data.kubernetes import Application


async def main(url, namespace, action, name, *rest):
    async with Client(url) as client:
        kube = KubernetesApi(client)
        if action == "create":
            manifest, schema = json.loads(rest[0]), json.loads(rest[1])
            body = {
                "api": "kubernetes",
                "kind": "Application",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "manifest": manifest,
                    "observer_schema": schema,
                    "constraints": {"cluster": {}},
                },
            }
            app = Application.deserialize(body, creation_ignored=True)
            made = await kube.create_application(app, namespace=namespace)
            print(json.dumps({"created": made.metadata.name}))
            return
        app = await kube.read_application(namespace=namespace, name=name)
        print(json.dumps({
            "state": app.status.state.name,
            "observer_schema": app.spec.observer_schema,
            "mangled_observer_schema": app.status.mangled_observer_schema,
            "last_applied_manifest": app.status.last_applied_manifest,
            "last_observed_manifest": app.status.last_observed_manifest,
        }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
