"""What the API server checks and fills in before an object is stored: validation, defaults.

Only the fields clients and the simulated controllers rely on are validated
(names, labels, pod templates, selectors, CRD names); defaults are those kubectl
shows back (``schedulerName``, Service ``clusterIP``, Deployment strategy…).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from shoal.machinery.names import KUBERNETES_NAME
from shoal.machinery.selectors.structured import matches_structured
from shoal.machinery.types import Obj
from shoal.sim.objects import (
    CRDS,
    DEPLOYMENTS,
    JOBS,
    NAMESPACES,
    NODES,
    PODS,
    REPLICASETS,
    SERVICES,
    STATEFULSETS,
    WORKLOADS,
    condition,
    pod_requests,
)
from shoal.sim.resources import ResourceType
from shoal.sim.store import ApiError

_JOB_UID = "batch.kubernetes.io/controller-uid"


def invalid(rt: ResourceType, name: str, field_: str, message: str) -> ApiError:
    """422 Invalid naming the offending field, as the API server words it."""
    what = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    return ApiError(
        422, "Invalid", f'{what} "{name}" is invalid: {field_}: Invalid value: {message}',
        {"name": name, "group": rt.group, "kind": rt.kind,
         "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field_}]},
    )


def pin_name(rt: ResourceType, obj: Obj, namespace: str, name: str) -> Obj:
    """Give ``obj`` the name (and namespace) of the URL; another name in the body is a 400."""
    meta: Obj = obj.setdefault("metadata", {})
    if meta.get("name") and meta["name"] != name:
        raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
    meta["name"] = name
    if rt.namespaced:
        meta["namespace"] = namespace
    return meta


def validate(rt: ResourceType, obj: Any) -> None:
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
        raise ApiError(400, "BadRequest", "the body must be a JSON object")
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if name is not None and (not isinstance(name, str) or len(name) > 253 or not (
        KUBERNETES_NAME.match(name) or (rt.crd is None and ":" in name)
    )):
        raise invalid(rt, str(name), "metadata.name",
                      "a lowercase RFC 1123 subdomain must consist of lower case "
                      "alphanumeric characters, '-' or '.'")
    for field_ in ("labels", "annotations"):
        values = meta.get(field_)
        if values is not None and (
            not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values())
        ):
            raise invalid(rt, str(name), f"metadata.{field_}", "must be a map of string to string")
    spec = obj.get("spec")
    if rt.key == PODS:
        _validate_pod_spec(rt, str(name), spec, "spec")
    elif rt.key in WORKLOADS.values():
        _validate_workload(rt, str(name), spec)
    elif rt.key == CRDS:
        _validate_crd(rt, str(name), spec)


def _validate_workload(rt: ResourceType, name: str, spec: Any) -> None:
    if not isinstance(spec, dict):
        raise invalid(rt, name, "spec", "Required value")
    template = spec.get("template")
    if not isinstance(template, dict):
        raise invalid(rt, name, "spec.template", "Required value")
    _validate_pod_spec(rt, name, template.get("spec"), "spec.template.spec")
    if rt.key != JOBS:
        sel = spec.get("selector")
        if not isinstance(sel, dict) or not (sel.get("matchLabels") or sel.get("matchExpressions")):
            raise invalid(rt, name, "spec.selector", "Required value")
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not matches_structured(sel, labels):
            raise invalid(rt, name, "spec.template.metadata.labels",
                          "`selector` does not match template `labels`")
    replicas = spec.get("replicas")
    if replicas is not None and (not isinstance(replicas, int) or replicas < 0):
        raise invalid(rt, name, "spec.replicas", "must be greater than or equal to 0")


def _validate_crd(rt: ResourceType, name: str, spec: Any) -> None:
    if not isinstance(spec, dict) or not spec.get("group") or not isinstance(
        spec.get("names"), dict
    ) or not spec["names"].get("plural") or not spec["names"].get("kind"):
        raise invalid(rt, name, "spec", "group and names are required")
    expected = f"{spec['names']['plural']}.{spec['group']}"
    if name != expected:
        raise invalid(rt, name, "metadata.name",
                      f"must be spec.names.plural+\".\"+spec.group: {expected}")
    if not spec.get("versions"):
        raise invalid(rt, name, "spec.versions", "Required value")


def _validate_pod_spec(rt: ResourceType, name: str, spec: Any, path: str) -> None:
    if not isinstance(spec, dict):
        raise invalid(rt, name, path, "Required value")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise invalid(rt, name, f"{path}.containers", "Required value")
    for i, c in enumerate(containers):
        for key in ("name", "image"):
            if not isinstance(c, dict) or not c.get(key):
                raise invalid(rt, name, f"{path}.containers[{i}].{key}", "Required value")


def check_crd_update(old: Obj, new: Obj) -> None:
    if old["spec"]["group"] != new["spec"]["group"]:
        raise ApiError(422, "Invalid", "spec.group: field is immutable")


def select_job_pods_by_uid(job: Obj) -> None:
    """Jobs select their pods by uid, so the uid is assigned before storing."""
    sel = job["spec"]["selector"].get("matchLabels") or {}
    if sel.get(_JOB_UID) != "pending":
        return
    uid = str(uuid.uuid4())
    name = job["metadata"]["name"]
    job["metadata"]["uid"] = uid
    job["spec"]["selector"]["matchLabels"] = {_JOB_UID: uid}
    labels = job["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})
    labels.update({_JOB_UID: uid, "controller-uid": uid,
                   "batch.kubernetes.io/job-name": name, "job-name": name})


class Defaults:
    """Fills defaults and server-owned status; holds the Service IP and node port
    allocators."""

    def __init__(self, new_node: Callable[[str], Obj]) -> None:
        self._new_node = new_node
        self._service_ips = 0
        self._node_ports = 0
        self._by_key: dict[str, Callable[[Obj, Any, Obj | None], None]] = {
            NAMESPACES: self._namespace,
            PODS: self._pod,
            DEPLOYMENTS: self._deployment,
            REPLICASETS: self._replicated,
            STATEFULSETS: self._statefulset,
            JOBS: self._job,
            SERVICES: self._service,
            CRDS: self._crd,
            NODES: self._node,
        }

    def fill(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Fill defaults on create (``old`` is None) or update."""
        spec = obj.get("spec")
        pod_spec = spec if rt.key == PODS else (
            (spec.get("template") or {}).get("spec") if isinstance(spec, dict)
            and rt.key in WORKLOADS.values() else None)
        if isinstance(pod_spec, dict):
            for c in pod_spec.get("containers") or ():
                for port in c.get("ports") or ():
                    if isinstance(port, dict):
                        port.setdefault("protocol", "TCP")
        fill = self._by_key.get(rt.key)
        if fill is not None and (isinstance(spec, dict) or rt.key in (NAMESPACES, NODES)):
            fill(obj, spec, old)

    @staticmethod
    def _namespace(obj: Obj, spec: Any, old: Obj | None) -> None:
        meta = obj["metadata"]
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}

    @staticmethod
    def _pod(obj: Obj, spec: Obj, old: Obj | None) -> None:
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        for c in spec.get("containers") or ():
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c.setdefault("terminationMessagePolicy", "File")
        if old is None:
            cpu, mem = pod_requests(obj)
            obj["status"] = {"phase": "Pending",
                             "qosClass": "Burstable" if cpu or mem else "BestEffort"}

    @staticmethod
    def _replicated(obj: Obj, spec: Obj, old: Obj | None) -> None:
        spec.setdefault("replicas", 1)
        if old is None:
            obj["status"] = {}

    def _deployment(self, obj: Obj, spec: Obj, old: Obj | None) -> None:
        self._replicated(obj, spec, old)
        spec.setdefault("strategy", {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": "25%", "maxSurge": "25%"}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)

    def _statefulset(self, obj: Obj, spec: Obj, old: Obj | None) -> None:
        self._replicated(obj, spec, old)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("serviceName", "")

    @staticmethod
    def _job(obj: Obj, spec: Obj, old: Obj | None) -> None:
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        if old is None:
            spec.setdefault("selector", {"matchLabels": {_JOB_UID: "pending"}})
            spec["template"].setdefault("spec", {}).setdefault("restartPolicy", "Never")
            obj["status"] = {}

    def _service(self, obj: Obj, spec: Obj, old: Obj | None) -> None:
        spec.setdefault("type", "ClusterIP")
        if "clusterIP" not in spec:
            if old is not None and old.get("spec", {}).get("clusterIP"):
                spec["clusterIP"] = old["spec"]["clusterIP"]
            else:
                self._service_ips += 1
                n = self._service_ips
                spec["clusterIP"] = f"10.96.{(n >> 8) & 255}.{n & 255}"
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        old_ports = ((old or {}).get("spec") or {}).get("ports") or []
        for index, p in enumerate(spec.get("ports") or ()):
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
            if spec["type"] in ("NodePort", "LoadBalancer") and not p.get("nodePort"):
                kept = old_ports[index].get("nodePort") if index < len(old_ports) else None
                p["nodePort"] = kept or self._next_node_port()
        obj.setdefault("status", {"loadBalancer": {}})

    def _next_node_port(self) -> int:
        """The next of Kubernetes' default node port range, 30000-32767 (as a cluster
        allocates one to every port of a NodePort or LoadBalancer Service)."""
        port = 30000 + self._node_ports % 2768
        self._node_ports += 1
        return port

    @staticmethod
    def _crd(obj: Obj, spec: Obj, old: Obj | None) -> None:
        spec.setdefault("scope", "Namespaced")
        names = dict(spec["names"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        obj["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")]
            or [spec["versions"][0]["name"]],
            "conditions": [
                condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
                condition("Established", "True", "InitialNamesAccepted",
                          "the initial names have been accepted"),
            ],
        }

    def _node(self, obj: Obj, spec: Any, old: Obj | None) -> None:
        if old is not None or (obj.get("status") or {}).get("capacity"):
            return
        meta = obj["metadata"]
        status = obj.setdefault("status", {})
        for k, v in self._new_node(meta["name"])["status"].items():
            status.setdefault(k, v)
        meta.setdefault("labels", {}).setdefault("kubernetes.io/hostname", meta["name"])
