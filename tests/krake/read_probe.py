"""Krake's own client lists and reads a namespace's applications; run by Krake's Python 3.8.

    python read_probe.py URL NAMESPACE

One JSON line per application read, through Krake's data classes:
``{"name", "scheduled_to", "running_on", "state"}``, then ``{"listed": [names]}``.
This file must stay valid Python 3.8: it runs in Krake's virtualenv.
"""

import asyncio
import json
import sys

from krake.client import Client
from krake.client.kubernetes import KubernetesApi


def ref_name(ref):
    return None if ref is None else ref.name


async def main(url, namespace):
    async with Client(url) as client:
        kube = KubernetesApi(client)
        listed = await kube.list_applications(namespace=namespace)
        names = []
        for app in listed.items:
            names.append(app.metadata.name)
            read = await kube.read_application(namespace=namespace, name=app.metadata.name)
            print(json.dumps({
                "name": read.metadata.name,
                "scheduled_to": ref_name(read.status.scheduled_to),
                "running_on": ref_name(read.status.running_on),
                "state": read.status.state.name,
                "manifest": len(read.spec.manifest),
            }))
        print(json.dumps({"listed": sorted(names)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
