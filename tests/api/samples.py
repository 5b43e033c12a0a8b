"""Plain JSON bodies of every kind, as a Krake client would send them (no Shoal code).

``SAMPLES`` maps ``(api, plural)`` to a function building a valid body and a
function changing its spec in place (for update tests).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Body = dict[str, Any]

KUBECONFIG: Body = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "ctx",
    "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
}

OPENSTACK: Body = {
    "url": "https://keystone.example:5000/v3",
    "auth": {
        "type": "password",
        "password": {
            "version": "3",
            "user": {"username": "u", "password": "p", "domain_name": "Default"},
            "project": {"name": "p", "domain_id": "default"},
        },
    },
}


@dataclass(frozen=True)
class Sample:
    api: str
    kind: str
    plural: str
    namespaced: bool
    spec: Callable[[], Body]  # the kind's own top-level fields (spec, rules, users...)
    change: Callable[[Body], None]  # changes those fields in place
    subresources: tuple[str, ...] = ()

    def body(self, name: str, namespace: str | None = None, **labels: str) -> Body:
        metadata: Body = {"name": name, "labels": dict(labels)}
        if namespace is not None:
            metadata["namespace"] = namespace
        body = {"api": self.api, "kind": self.kind, "metadata": metadata, **self.spec()}
        involved = body.get("involved_object")
        if isinstance(involved, dict):
            involved["namespace"] = namespace  # an event tells of its own namespace's objects
        return body

    def collection(self, namespace: str | None = "default") -> str:
        if self.namespaced and namespace is not None:
            return f"/{self.api}/namespaces/{namespace}/{self.plural}"
        return f"/{self.api}/{self.plural}"

    def item(self, name: str, namespace: str | None = "default") -> str:
        return f"{self.collection(namespace)}/{name}"


def _metric() -> Body:
    return {
        "spec": {
            "allowed_values": [],
            "min": 0,
            "max": 1,
            "provider": {"name": "prom", "metric": "node_load"},
        }
    }


def _metric_change(body: Body) -> None:
    body["spec"]["max"] = 10


def _provider() -> Body:
    return {"spec": {"type": "static", "static": {"metrics": {"load": 0.5}}}}


def _provider_change(body: Body) -> None:
    body["spec"] = {"type": "prometheus", "prometheus": {"url": "http://prometheus.example:9090"}}


def _role() -> Body:
    return {
        "rules": [{"api": "core", "resources": ["metrics"], "namespaces": [], "verbs": ["get"]}]
    }


def _role_change(body: Body) -> None:
    body["rules"][0]["verbs"].append("list")


def _rolebinding() -> Body:
    return {"users": ["alice"], "roles": ["reader"]}


def _rolebinding_change(body: Body) -> None:
    body["users"].append("bob")


def _application() -> Body:
    return {
        "spec": {
            "manifest": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "web"},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                             "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                                 "containers": [{"name": "web", "image": "nginx:1.27"}]}}},
                }
            ],
            "constraints": {
                "migration": True,
                "cluster": {"labels": ["location is DE"], "metrics": ["load < 0.5"]},
            },
        }
    }


def _application_change(body: Body) -> None:
    body["spec"]["manifest"][0]["spec"]["replicas"] = 3


def _cluster() -> Body:
    return {"spec": {"kubeconfig": copy.deepcopy(KUBECONFIG), "metrics": []}}


def _cluster_change(body: Body) -> None:
    body["spec"]["metrics"] = [{"name": "load", "weight": 1.0, "namespaced": False}]


TOSCA: Body = {
    "tosca_definitions_version": "tosca_simple_yaml_1_0",
    "node_types": {"site.Compute": {"derived_from": "tosca.nodes.Compute"}},
    "topology_template": {
        "node_templates": {
            "workers": {
                "type": "site.Compute",
                "capabilities": {
                    "host": {"properties": {"num_cpus": 4, "mem_size": "8 GB"}},
                    "scalable": {"properties": {"min_instances": 1, "max_instances": 10,
                                                "default_instances": 2}},
                },
            },
        },
        "outputs": {"kubeconfig": {"value": "set by the infrastructure provider"}},
    },
}


def _cloud_cluster() -> Body:
    return {"spec": {"tosca": copy.deepcopy(TOSCA)}}


def _cloud_cluster_change(body: Body) -> None:
    body["spec"]["tosca"]["topology_template"]["node_templates"]["workers"]["capabilities"][
        "scalable"]["properties"]["default_instances"] = 3  # fmt: skip


def _cloud() -> Body:
    return {"spec": {"type": "openstack", "openstack": copy.deepcopy(OPENSTACK)}}


def _cloud_change(body: Body) -> None:
    body["spec"]["openstack"]["metrics"] = [{"name": "load", "weight": 2.0}]


def _infrastructure_provider() -> Body:
    return {"spec": {"type": "im", "im": {"url": "https://im.example:8800", "token": "t"}}}


def _infrastructure_provider_change(body: Body) -> None:
    body["spec"]["im"]["url"] = "https://im2.example:8800"


def _lease() -> Body:
    return {"spec": {"holder": None, "duration": 15.0}}


def _lease_change(body: Body) -> None:
    body["spec"]["holder"] = "scheduler-1"
    body["spec"]["transitions"] = 1


def _scheduler_configuration() -> Body:
    return {"spec": {"stickiness": 0.2, "plugins": {"filters": ["label-constraints"]}}}


def _scheduler_configuration_change(body: Body) -> None:
    body["spec"]["stickiness"] = 0.5


def _event() -> Body:
    return {
        "involved_object": {"api": "kubernetes", "kind": "Application", "namespace": "default",
                            "name": "web", "uid": "0b1c"},
        "reason": "Scheduled",
        "message": "Scheduled to c1 (score 0.82, 3/4 clusters available)",
        "reporting_component": "scheduler",
        "type": "Normal",
    }


def _event_change(body: Body) -> None:
    body["message"] = "Scheduled to c2 (score 0.91, 4/4 clusters available)"
    body["count"] = 2


def _task() -> Body:
    return {"spec": {"target_clusters": ["c1"]}}


def _task_change(body: Body) -> None:
    body["spec"]["ttl_seconds_after_finished"] = 60


def _pod() -> Body:
    requests = {"cpu": "500m", "memory": "128Mi"}
    return {"spec": {"containers": [{"name": "c", "image": "nginx",
                                     "resources": {"requests": requests}}]}}


def _pod_change(body: Body) -> None:
    body["spec"]["priority"] = 5


def _copy() -> Body:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 1}}  # fmt: skip
    cluster = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "edge"}
    return {"spec": {"app_namespace": "default", "app_name": "web", "app_uid": "u-1",
                     "cluster": cluster, "kube_namespace": "default",
                     "manifest": [deployment]}}  # fmt: skip


def _copy_change(body: Body) -> None:
    body["spec"]["generation"] = 2


def _scoped(
    api: str, kind: str, plural: str, make: Any, change: Any, subresources: tuple[str, ...] = ()
) -> list[Sample]:
    """A cluster-wide kind and its namespaced twin (``GlobalMetric`` and ``Metric``)."""
    return [
        Sample(api, f"Global{kind}", f"global{plural}", False, make, change, subresources),
        Sample(api, kind, plural, True, make, change, subresources),
    ]


SAMPLES: list[Sample] = [
    *_scoped("core", "Metric", "metrics", _metric, _metric_change),
    *_scoped("core", "MetricsProvider", "metricsproviders", _provider, _provider_change,
             ("status",)),
    Sample("core", "Role", "roles", False, _role, _role_change),
    Sample("core", "RoleBinding", "rolebindings", False, _rolebinding, _rolebinding_change),
    Sample("kubernetes", "Application", "applications", True, _application, _application_change,
           ("status", "binding")),
    Sample("kubernetes", "Cluster", "clusters", True, _cluster, _cluster_change,
           ("status", "binding")),
    *_scoped("infrastructure", "Cloud", "clouds", _cloud, _cloud_change, ("status",)),
    *_scoped("infrastructure", "InfrastructureProvider", "infrastructureproviders",
             _infrastructure_provider, _infrastructure_provider_change),
    Sample("core", "Lease", "leases", False, _lease, _lease_change),
    Sample("core", "Event", "events", True, _event, _event_change),
    Sample("scheduling", "RescheduleTask", "rescheduletasks", False, _task, _task_change,
           ("status",)),
    Sample("scheduling", "SchedulerConfiguration", "schedulerconfigurations", False,
           _scheduler_configuration, _scheduler_configuration_change),
    Sample("scheduling", "Pod", "pods", True, _pod, _pod_change, ("status",)),
    Sample("kubernetes", "Copy", "copies", True, _copy, _copy_change, ("status",)),
]  # fmt: skip

CLOUD_CLUSTER = Sample("kubernetes", "Cluster", "clusters", True, _cloud_cluster,
                       _cloud_cluster_change, ("status", "binding"))  # fmt: skip
"""A cluster to be built on a cloud: its TOSCA template is parsed at every create."""

BY_KIND: dict[str, Sample] = {s.kind: s for s in SAMPLES}
APPLICATION = BY_KIND["Application"]
CLUSTER = BY_KIND["Cluster"]


def paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a body (keys and list indexes from the top), for fuzzers that change one."""
    found = [at]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*at, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*at, index))
    return found
