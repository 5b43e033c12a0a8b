"""Every method of Krake 1.0.1's client against a Shoal API; run by Krake's own Python 3.8.

    python client_probe.py SHOAL_URL BODIES_JSON

``BODIES_JSON``: ``{"kubeconfig": ..., "openstack": ...}``, a cluster's
kubeconfig and a cloud's OpenStack section, as the Shoal tests build them.

Bodies are Krake data classes (built with ``deserialize``, sent with
``serialize``, as Krake's controllers do), and every answer goes through
Krake's ``deserialize``. Prints one JSON line per call:
``{"call": "kubernetes.read_application", "ok": true}`` or with ``"error"``.
This file must stay valid Python 3.8: it runs in Krake's virtualenv.
"""

import asyncio
import copy
import json
import sys

from krake.client import Client
from krake.client.core import CoreApi
from krake.client.infrastructure import InfrastructureApi
from krake.client.kubernetes import KubernetesApi
from krake.data.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    Role,
    RoleBinding,
)
from krake.data.infrastructure import (
    Cloud,
    CloudBinding,
    GlobalCloud,
    GlobalInfrastructureProvider,
    InfrastructureProvider,
)
from krake.data.kubernetes import (
    Application,
    ApplicationComplete,
    ApplicationShutdown,
    Cluster,
    ClusterBinding,
    ClusterNode,
)
from probe_calls import CALLED, call

NS = "probe"
BODIES = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
KUBECONFIG = BODIES.get("kubeconfig", {})
MANIFEST = [
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "probe-config"},
        "data": {"key": "value"},
    }
]
OPENSTACK = {"type": "openstack", "openstack": BODIES.get("openstack", {})}
IM = {"type": "im", "im": {"url": "https://im.example:8800", "username": "u", "password": "p"}}
METRIC = {"allowed_values": [], "min": 0, "max": 1, "provider": {"name": "static", "metric": "m"}}
NODE = {
    "api": "kubernetes",
    "kind": "ClusterNode",
    "metadata": {"name": "node-1"},
    "status": {
        "conditions": [
            {
                "message": "kubelet is ready",
                "reason": "KubeletReady",
                "status": "True",
                "type": "Ready",
            }
        ]
    },
}
PROVIDER = {"type": "static", "static": {"metrics": {"m": 0.5}}}


def meta(name, namespaced):
    data = {"name": name}
    if namespaced:
        data["namespace"] = NS
    return data


def cls_body(cls, name, namespaced, top):
    data = {"api": cls.api, "kind": cls.kind, "metadata": meta(name, namespaced)}
    data.update(copy.deepcopy(top))
    return cls.deserialize(data, creation_ignored=True)


# (api class, kind suffix used in method names, data class, namespaced, body fields,
#  plural suffix, extra subresource calls)
KINDS = [
    ("core", "global_metric", GlobalMetric, False, {"spec": METRIC}, "global_metrics"),
    ("core", "metric", Metric, True, {"spec": METRIC}, "metrics"),
    (
        "core",
        "global_metrics_provider",
        GlobalMetricsProvider,
        False,
        {"spec": PROVIDER},
        "global_metrics_providers",
    ),
    ("core", "metrics_provider", MetricsProvider, True, {"spec": PROVIDER}, "metrics_providers"),
    (
        "core",
        "role",
        Role,
        False,
        {
            "rules": [
                {
                    "api": "kubernetes",
                    "resources": ["applications"],
                    "namespaces": [NS],
                    "verbs": ["get", "list"],
                }
            ]
        },
        "roles",
    ),
    ("core", "role_binding", RoleBinding, False, {"users": ["u"], "roles": ["r"]}, "role_bindings"),
    (
        "infrastructure",
        "global_infrastructure_provider",
        GlobalInfrastructureProvider,
        False,
        {"spec": IM},
        "global_infrastructure_providers",
    ),
    (
        "infrastructure",
        "infrastructure_provider",
        InfrastructureProvider,
        True,
        {"spec": IM},
        "infrastructure_providers",
    ),
    ("infrastructure", "global_cloud", GlobalCloud, False, {"spec": OPENSTACK}, "global_clouds"),
    ("infrastructure", "cloud", Cloud, True, {"spec": OPENSTACK}, "clouds"),
    (
        "kubernetes",
        "cluster",
        Cluster,
        True,
        {
            "spec": {
                "kubeconfig": KUBECONFIG,
                "metrics": [],
                "custom_resources": [],
                "constraints": {"cloud": {}},
            }
        },
        "clusters",
    ),
    (
        "kubernetes",
        "application",
        Application,
        True,
        {"spec": {"manifest": MANIFEST, "constraints": {"cluster": {}}}},
        "applications",
    ),
]


def kwargs(namespaced, name=None):
    out = {}
    if namespaced:
        out["namespace"] = NS
    if name is not None:
        out["name"] = name
    return out


async def first_event(label, watcher, change):
    """Open the watch, make a change, and read the event it causes."""

    async def one():
        async with watcher as stream:
            await change()
            async for event in stream:
                return event
        return None

    return await call(label, asyncio.wait_for(one(), 10))


async def probe_kind(apis, group, suffix, cls, namespaced, fields, plural):
    api = apis[group]
    name = "probe-" + suffix.replace("_", "-")
    where = kwargs(namespaced)
    item = kwargs(namespaced, name)

    def verb_of(template):
        target = plural if template.endswith("_all_") or template in ("list_", "watch_") else suffix
        attribute = template + target if template.endswith("_") else template.format(target)
        return getattr(api, attribute, None), f"{group}.{attribute}"

    sent = cls_body(cls, name, namespaced, fields)
    create, label = verb_of("create_")
    created = await call(label, create(sent, **where))
    read, label = verb_of("read_")
    await call(label, read(**item))
    for template, args in (("list_", where), ("list_all_", {})):
        lister, label = verb_of(template)
        if lister is not None:
            await call(label, lister(**args))
    state = {"current": created or sent, "round": 0}

    async def update():
        current = state["current"]
        state["round"] += 1
        current.metadata.labels = {"probe": f"update-{state['round']}"}
        updater, label = verb_of("update_")
        state["current"] = await call(label, updater(body=current, **item)) or current

    for template, args in (("watch_", where), ("watch_all_", {})):
        watcher, label = verb_of(template)
        if watcher is not None:
            await first_event(label, watcher(**args), update)
    status, label = verb_of("update_{}_status")
    if status is not None:
        await call(label, status(body=state["current"], **item))
    return name


async def main(url):
    async with Client(url) as client:
        apis = {
            "core": CoreApi(client),
            "infrastructure": InfrastructureApi(client),
            "kubernetes": KubernetesApi(client),
        }
        names = {}
        for group, suffix, cls, namespaced, fields, plural in KINDS:
            names[suffix] = await probe_kind(apis, group, suffix, cls, namespaced, fields, plural)
        kube = apis["kubernetes"]
        # a cluster status with nodes, as Krake's cluster observer writes it, read back
        cluster = await call(
            "kubernetes.read_cluster", kube.read_cluster(namespace=NS, name=names["cluster"])
        )
        if cluster is not None:
            cluster.status.nodes = [ClusterNode.deserialize(NODE)]
            await call(
                "kubernetes.update_cluster_status",
                kube.update_cluster_status(body=cluster, namespace=NS, name=names["cluster"]),
            )
            read = await call(
                "kubernetes.read_cluster", kube.read_cluster(namespace=NS, name=names["cluster"])
            )
            if read is not None and read.status.nodes != cluster.status.nodes:
                print(json.dumps({"call": "nodes", "ok": False, "error": "nodes changed"}))
        # bindings, as Krake's scheduler sends them: (body class, its field, target kind,
        # the object bound, the one it is bound to)
        for cls, field, target, what, to in (
            (ClusterBinding, "cluster", "Cluster", "application", "cluster"),
            (CloudBinding, "cloud", "Cloud", "cluster", "cloud"),
        ):
            ref = {"api": cls.api, "kind": target, "namespace": NS, "name": names[to]}
            body = cls.deserialize({"api": cls.api, "kind": cls.kind, field: ref})
            await call(
                f"kubernetes.update_{what}_binding",
                getattr(kube, f"update_{what}_binding")(body, namespace=NS, name=names[what]),
            )
        # complete and shutdown: each on an application of its own whose status carries the
        # hook's token, written as Krake's application controller writes it.
        spec = dict(KINDS[-1][4])
        for sub, cls in (("complete", ApplicationComplete), ("shutdown", ApplicationShutdown)):
            app_name = "probe-" + sub
            app = await call(
                "kubernetes.create_application",
                kube.create_application(cls_body(Application, app_name, True, spec), namespace=NS),
            )
            if app is not None:
                setattr(app.status, sub + "_token", "token-" + sub)
                await call(
                    "kubernetes.update_application_status",
                    kube.update_application_status(body=app, namespace=NS, name=app_name),
                )
            sub_body = cls.deserialize(
                {"api": "kubernetes", "kind": cls.kind, "token": "token-" + sub}
            )
            await call(
                "kubernetes.update_application_" + sub,
                getattr(kube, "update_application_" + sub)(sub_body, namespace=NS, name=app_name),
            )
        for group, suffix, _cls, namespaced, _fields, _plural in reversed(KINDS):
            delete = getattr(apis[group], "delete_" + suffix)
            await call(f"{group}.delete_{suffix}", delete(**kwargs(namespaced, names[suffix])))


def uncalled():
    """Public methods of Krake's three API classes that the probe did not call."""
    missing = []
    for group, cls in (
        ("core", CoreApi),
        ("infrastructure", InfrastructureApi),
        ("kubernetes", KubernetesApi),
    ):
        for attribute in dir(cls):
            if attribute.startswith("_") or not callable(getattr(cls, attribute)):
                continue
            if f"{group}.{attribute}" not in CALLED:
                missing.append(f"{group}.{attribute}")
    return missing


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
    print(json.dumps({"uncalled": uncalled()}), flush=True)
