"""One simulated cluster: API semantics (create/update/patch/delete), controllers, faults.

Controllers are event-driven: every store change goes through a listener that
enqueues the affected keys (the owning ReplicaSet of a pod, the Deployment of a
ReplicaSet, a pod to schedule…) and one worker task per cluster drains that queue.
Nothing ever loops over all objects of a kind on a timer.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from shoal.sim.patch import (
    PatchError,
    json_patch,
    leaf_paths,
    merge_patch,
    remove_path,
    strategic_merge,
)
from shoal.sim.quantity import format_bytes, format_cpu, parse_bytes, parse_cpu
from shoal.sim.resources import ResourceType
from shoal.sim.store import ApiError, Store, not_found, now

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PODS = "/pods"
NODES = "/nodes"
NAMESPACES = "/namespaces"
DEPLOYMENTS = "apps/deployments"
REPLICASETS = "apps/replicasets"
STATEFULSETS = "apps/statefulsets"
DAEMONSETS = "apps/daemonsets"
JOBS = "batch/jobs"
CRDS = "apiextensions.k8s.io/customresourcedefinitions"

KIND_KEYS = {
    "Deployment": DEPLOYMENTS,
    "ReplicaSet": REPLICASETS,
    "StatefulSet": STATEFULSETS,
    "DaemonSet": DAEMONSETS,
    "Job": JOBS,
}

DEFAULT_SCHEDULERS = ("", "default-scheduler")
KUBELET_VERSION = "v1.32.0-shoal-sim"
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}


def template_hash(template: Any) -> str:
    return hashlib.sha1(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).hexdigest()[:10]


def controller_of(obj: Obj) -> Obj | None:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def pod_requests(pod: Obj) -> tuple[int, int]:
    """(millicores, bytes) requested by a pod's containers; limits stand in for requests."""
    cpu = mem = 0
    for c in pod.get("spec", {}).get("containers") or ():
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        cpu += parse_cpu(req.get("cpu", lim.get("cpu")))
        mem += parse_bytes(req.get("memory", lim.get("memory")))
    return cpu, mem


def _condition(ctype: str, status: str, reason: str = "", message: str = "") -> Obj:
    ts = now()
    cond: Obj = {
        "type": ctype,
        "status": status,
        "lastTransitionTime": ts,
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def pod_ready(pod: Obj) -> bool:
    for c in pod.get("status", {}).get("conditions") or ():
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _active(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") and not pod[
        "metadata"
    ].get("deletionTimestamp")


@dataclass
class NodeInfo:
    """Scheduler view of a node: allocatable, usage, and whether it takes new pods."""

    cpu: int
    memory: int
    pods: int
    labels: dict[str, str]
    schedulable: bool
    used_cpu: int = 0
    used_memory: int = 0
    used_pods: int = 0
    pod_keys: set[tuple[str, str]] = field(default_factory=set)

    def fits(self, cpu: int, memory: int) -> bool:
        return (
            self.schedulable
            and self.used_pods < self.pods
            and self.used_cpu + cpu <= self.cpu
            and self.used_memory + memory <= self.memory
        )


@dataclass
class NodeFault:
    not_ready: bool = False
    memory_pressure: bool = False
    removed: bool = False


class SimCluster:
    """A simulated Kubernetes cluster held in memory."""

    def __init__(
        self,
        name: str,
        nodes: int = 3,
        node_labels: dict[str, str] | None = None,
        cpu: str = "8",
        memory: str = "32Gi",
        max_pods: int = 110,
        region: str | None = None,
        zones: int = 3,
        pod_start_delay: float = 0.5,
        job_duration: float = 1.0,
        token: str | None = None,
    ) -> None:
        self.name = name
        self.token = token or secrets.token_hex(16)
        self.node_cpu = cpu
        self.node_memory = memory
        self.max_pods = max_pods
        self.region = region or f"{name}-region"
        self.zones = max(1, zones)
        self.node_labels = dict(node_labels or {})
        self.pod_start_delay = pod_start_delay
        self.job_duration = job_duration
        self.unreachable = False
        self.node_faults: dict[str, NodeFault] = {}
        self.removed_nodes: dict[str, Obj] = {}
        self.store = Store()
        self.registry = self.store.registry
        self.nodes: dict[str, NodeInfo] = {}
        self.node_order: list[str] = []
        self._rr = 0
        self.pod_node: dict[tuple[str, str], tuple[str, int, int]] = {}
        self.unschedulable: set[tuple[str, str]] = set()
        self.applied: dict[tuple[str, str], Obj] = {}  # (uid, manager) → applied config
        self._queue: dict[tuple[str, ...], None] = {}
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._retry_unschedulable = False
        self._ip = 0
        self._svc_ip = 0
        self.store.log_events = False
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.rt(NAMESPACES), {"metadata": {"name": ns}})
        for i in range(nodes):
            self.add_node(f"n-{i}", self.node_object(f"n-{i}", i))
        for node in self.store.list(NODES):
            self._refresh_node(node)
        self.store.log_events = True
        self.store.compact()
        self.store.listeners.append(self._on_event)

    # -- helpers -------------------------------------------------------------

    def rt(self, key: str) -> ResourceType:
        return self.store.registry.by_key[key]

    def node_object(self, name: str, index: int | None = None) -> Obj:
        if index is None:
            index = len(self.node_order)
        zone = f"{self.region}-{chr(ord('a') + index % self.zones)}"
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "sim",
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": self.region,
            "type": "shoal-sim",
            **self.node_labels,
        }
        cap = {
            "cpu": self.node_cpu,
            "memory": self.node_memory,
            "pods": str(self.max_pods),
            "ephemeral-storage": "100Gi",
        }
        self._ip += 1
        ip = f"10.{(self._ip >> 16) & 255}.{(self._ip >> 8) & 255}.{self._ip & 255}"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", "shoal.dev/sim": "true"},
            },
            "spec": {},
            "status": {
                "capacity": cap,
                "allocatable": dict(cap),
                "conditions": self._node_conditions(NodeFault()),
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "shoal-sim://1.0",
                    "osImage": "shoal sim",
                    "kernelVersion": "6.0.0-sim",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
                "phase": "Running",
            },
        }

    def _node_conditions(self, fault: NodeFault) -> list[Obj]:
        ts = now()

        def cond(ctype: str, status: str, reason: str, message: str) -> Obj:
            return {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": ts,
                "lastTransitionTime": ts,
            }

        return [
            cond("MemoryPressure", "True" if fault.memory_pressure else "False",
                 "KubeletHasInsufficientMemory" if fault.memory_pressure
                 else "KubeletHasSufficientMemory",
                 "kubelet has insufficient memory available" if fault.memory_pressure
                 else "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure",
                 "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID",
                 "kubelet has sufficient PID available"),
            cond("Ready", "False" if fault.not_ready else "True",
                 "KubeletNotReady" if fault.not_ready else "KubeletReady",
                 "node is not ready (simulated fault)" if fault.not_ready
                 else "kubelet is posting ready status"),
        ]

    def add_node(self, name: str, obj: Obj | None = None) -> Obj:
        """Add a node (with default capacity and labels unless ``obj`` is given)."""
        return self.create(self.rt(NODES), obj or self.node_object(name))

    def _refresh_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        alloc = node.get("status", {}).get("allocatable") or node.get("status", {}).get(
            "capacity"
        ) or {}
        ready = False
        pressure = False
        for c in node.get("status", {}).get("conditions") or ():
            if c.get("type") == "Ready":
                ready = c.get("status") == "True"
            elif c.get("type") == "MemoryPressure":
                pressure = c.get("status") == "True"
        schedulable = ready and not pressure and not node.get("spec", {}).get("unschedulable")
        for taint in node.get("spec", {}).get("taints") or ():
            if taint.get("effect") in ("NoSchedule", "NoExecute"):
                schedulable = False
        info = self.nodes.get(name)
        if info is None:
            info = NodeInfo(0, 0, 0, {}, False)
            self.nodes[name] = info
            self.node_order.append(name)
        was = info.schedulable
        info.cpu = parse_cpu(alloc.get("cpu", "0"))
        info.memory = parse_bytes(alloc.get("memory", "0"))
        info.pods = int(parse_bytes(alloc.get("pods", "110")))
        info.labels = dict(node["metadata"].get("labels") or {})
        info.schedulable = schedulable
        if schedulable and not was:
            self._retry_unschedulable = True

    # -- API verbs -----------------------------------------------------------

    def _validate(self, rt: ResourceType, obj: Obj) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "the body must be a JSON object")
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if name is not None and (not isinstance(name, str) or len(name) > 253 or not (
            _NAME_RE.match(name) or (rt.crd is None and ":" in name)
        )):
            raise self._invalid(rt, str(name), "metadata.name",
                                "a lowercase RFC 1123 subdomain must consist of lower case "
                                "alphanumeric characters, '-' or '.'")
        for field_ in ("labels", "annotations"):
            values = meta.get(field_)
            if values is not None and (
                not isinstance(values, dict)
                or not all(isinstance(v, str) for v in values.values())
            ):
                raise self._invalid(rt, str(name), f"metadata.{field_}",
                                    "must be a map of string to string")
        spec = obj.get("spec")
        if rt.key == PODS:
            self._validate_pod_spec(rt, str(name), spec, "spec")
        elif rt.key in (DEPLOYMENTS, REPLICASETS, STATEFULSETS, DAEMONSETS, JOBS):
            if not isinstance(spec, dict):
                raise self._invalid(rt, str(name), "spec", "Required value")
            template = spec.get("template")
            if not isinstance(template, dict):
                raise self._invalid(rt, str(name), "spec.template", "Required value")
            self._validate_pod_spec(rt, str(name), template.get("spec"), "spec.template.spec")
            if rt.key != JOBS:
                sel = spec.get("selector")
                if not isinstance(sel, dict) or not (
                    sel.get("matchLabels") or sel.get("matchExpressions")
                ):
                    raise self._invalid(rt, str(name), "spec.selector", "Required value")
                from shoal.sim.selectors import match_label_selector

                labels = (template.get("metadata") or {}).get("labels") or {}
                if not match_label_selector(sel, labels):
                    raise self._invalid(
                        rt, str(name), "spec.template.metadata.labels",
                        "`selector` does not match template `labels`",
                    )
            replicas = spec.get("replicas")
            if replicas is not None and (not isinstance(replicas, int) or replicas < 0):
                raise self._invalid(rt, str(name), "spec.replicas",
                                    "must be greater than or equal to 0")
        elif rt.key == CRDS:
            if not isinstance(spec, dict) or not spec.get("group") or not isinstance(
                spec.get("names"), dict
            ) or not spec["names"].get("plural") or not spec["names"].get("kind"):
                raise self._invalid(rt, str(name), "spec", "group and names are required")
            expected = f"{spec['names']['plural']}.{spec['group']}"
            if name != expected:
                raise self._invalid(rt, str(name), "metadata.name",
                                    f"must be spec.names.plural+\".\"+spec.group: {expected}")
            if not spec.get("versions"):
                raise self._invalid(rt, str(name), "spec.versions", "Required value")

    def _validate_pod_spec(self, rt: ResourceType, name: str, spec: Any, path: str) -> None:
        if not isinstance(spec, dict):
            raise self._invalid(rt, name, path, "Required value")
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            raise self._invalid(rt, name, f"{path}.containers", "Required value")
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name"):
                raise self._invalid(rt, name, f"{path}.containers[{i}].name", "Required value")
            if not c.get("image"):
                raise self._invalid(rt, name, f"{path}.containers[{i}].image", "Required value")

    @staticmethod
    def _invalid(rt: ResourceType, name: str, field_: str, message: str) -> ApiError:
        what = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
        return ApiError(
            422, "Invalid", f'{what} "{name}" is invalid: {field_}: Invalid value: {message}',
            {"name": name, "group": rt.group, "kind": rt.kind,
             "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field_}]},
        )

    def _check_namespace(self, rt: ResourceType, obj: Obj, namespace: str | None) -> str:
        meta = obj.setdefault("metadata", {})
        if not rt.namespaced:
            return ""
        ns = namespace or meta.get("namespace") or "default"
        if meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise ApiError(
                400, "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        meta["namespace"] = ns
        nsobj = self.store.get(NAMESPACES, "", ns)
        if nsobj is None:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                           {"name": ns, "kind": "namespaces"})
        if nsobj["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", f"namespace {ns} is being terminated")
        return str(ns)

    def _defaults(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Fill defaults and server-owned status on create (``old`` is None) or update."""
        spec = obj.get("spec")
        meta = obj["metadata"]
        pod_spec = spec if rt.key == PODS else (
            (spec.get("template") or {}).get("spec") if isinstance(spec, dict)
            and rt.key in KIND_KEYS.values() else None)
        if isinstance(pod_spec, dict):
            for c in pod_spec.get("containers") or ():
                for port in c.get("ports") or ():
                    if isinstance(port, dict):
                        port.setdefault("protocol", "TCP")
        if rt.key == NAMESPACES:
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        elif rt.key == PODS and isinstance(spec, dict):
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
        elif rt.key in (DEPLOYMENTS, REPLICASETS, STATEFULSETS) and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            if rt.key == DEPLOYMENTS:
                spec.setdefault("strategy", {"type": "RollingUpdate", "rollingUpdate": {
                    "maxUnavailable": "25%", "maxSurge": "25%"}})
                spec.setdefault("revisionHistoryLimit", 10)
                spec.setdefault("progressDeadlineSeconds", 600)
            if rt.key == STATEFULSETS:
                spec.setdefault("podManagementPolicy", "OrderedReady")
                spec.setdefault("serviceName", "")
            if old is None:
                obj["status"] = {}
        elif rt.key == JOBS and isinstance(spec, dict):
            spec.setdefault("completions", 1)
            spec.setdefault("parallelism", 1)
            spec.setdefault("backoffLimit", 6)
            if old is None:
                uid_label = {"batch.kubernetes.io/controller-uid": "pending"}
                spec.setdefault("selector", {"matchLabels": uid_label})
                spec["template"].setdefault("spec", {}).setdefault("restartPolicy", "Never")
                obj["status"] = {}
        elif rt.key == "/services" and isinstance(spec, dict):
            spec.setdefault("type", "ClusterIP")
            if "clusterIP" not in spec and spec.get("clusterIP") != "None":
                if old is not None and old.get("spec", {}).get("clusterIP"):
                    spec["clusterIP"] = old["spec"]["clusterIP"]
                else:
                    self._svc_ip += 1
                    spec["clusterIP"] = f"10.96.{(self._svc_ip >> 8) & 255}.{self._svc_ip & 255}"
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            for p in spec.get("ports") or ():
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))
            obj.setdefault("status", {"loadBalancer": {}})
        elif rt.key == CRDS and isinstance(spec, dict):
            spec.setdefault("scope", "Namespaced")
            names = dict(spec["names"])
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
            obj["status"] = {
                "acceptedNames": names,
                "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")]
                or [spec["versions"][0]["name"]],
                "conditions": [
                    _condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
                    _condition("Established", "True", "InitialNamesAccepted",
                               "the initial names have been accepted"),
                ],
            }
        elif rt.key == NODES and old is None and not (obj.get("status") or {}).get("capacity"):
            tmpl = self.node_object(meta["name"])
            status = obj.setdefault("status", {})
            for k, v in tmpl["status"].items():
                status.setdefault(k, v)
            labels = meta.setdefault("labels", {})
            labels.setdefault("kubernetes.io/hostname", meta["name"])

    def create(
        self, rt: ResourceType, obj: Obj, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        self._validate(rt, obj)
        obj = copy.deepcopy(obj)
        self._check_namespace(rt, obj, namespace)
        meta = obj["metadata"]
        for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                  "generation", "selfLink"):
            meta.pop(k, None)
        self._defaults(rt, obj, None)
        if rt.key == JOBS:
            self._job_selector(obj)
        if dry_run:
            preview = copy.deepcopy(obj)
            preview["apiVersion"] = rt.api_version
            preview["kind"] = rt.kind
            if not meta.get("name"):
                meta["name"] = (meta.get("generateName") or "") + "dryrun"
            return preview
        return self.store.create(rt, obj)

    @staticmethod
    def _job_selector(job: Obj) -> None:
        """Jobs select their pods by uid, so the uid is assigned before storing."""
        sel = job["spec"]["selector"].get("matchLabels") or {}
        if sel.get("batch.kubernetes.io/controller-uid") != "pending":
            return
        uid = str(uuid.uuid4())
        job["metadata"]["uid"] = uid
        job["spec"]["selector"]["matchLabels"] = {"batch.kubernetes.io/controller-uid": uid}
        labels = job["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})
        labels["batch.kubernetes.io/controller-uid"] = uid
        labels["controller-uid"] = uid
        labels["batch.kubernetes.io/job-name"] = job["metadata"]["name"]
        labels["job-name"] = job["metadata"]["name"]

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt, name)
        return obj

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        obj: Obj,
        subresource: str | None = None,
        dry_run: bool = False,
        precondition: bool = True,
    ) -> Obj:
        """Replace an object (PUT); ``subresource='status'`` replaces only the status."""
        self._validate(rt, obj)
        ns = namespace if rt.namespaced else ""
        old = self.store.get(rt.key, ns, name)
        if old is None:
            raise not_found(rt, name)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = ns
        rv = meta.get("resourceVersion")
        if precondition and rv and rv != old["metadata"]["resourceVersion"]:
            what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise ApiError(
                409, "Conflict",
                f'Operation cannot be fulfilled on {what} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": name, "group": rt.group, "kind": rt.plural},
            )
        has_status = "status" in rt.subresources
        if subresource == "status":
            new = copy.deepcopy(old)
            new["status"] = obj.get("status", {})
            obj = new
        elif subresource is not None:
            raise ApiError(404, "NotFound", f"subresource {subresource} not supported")
        else:
            if has_status:
                if "status" in old:
                    obj["status"] = copy.deepcopy(old["status"])
                else:
                    obj.pop("status", None)
            for k in ("deletionTimestamp", "managedFields"):
                if k in old["metadata"] and k not in meta:
                    meta[k] = old["metadata"][k]
            self._defaults(rt, obj, old)
            if rt.key == CRDS:
                self._check_crd_update(old, obj)
        if dry_run:
            return obj
        stored = self.store.replace(rt, obj, old)
        return stored

    def _check_crd_update(self, old: Obj, new: Obj) -> None:
        if old["spec"]["group"] != new["spec"]["group"]:
            raise ApiError(422, "Invalid", "spec.group: field is immutable")

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        body: Any,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """Apply a patch of one of ``PATCH_TYPES``; apply creates missing objects."""
        ns = namespace if rt.namespaced else ""
        old = self.store.get(rt.key, ns, name)
        if patch_type == "apply":
            return self._apply(rt, ns, name, old, body, subresource, field_manager, force,
                               dry_run)
        if old is None:
            raise not_found(rt, name)
        current = copy.deepcopy(old)
        try:
            if patch_type == "merge":
                if not isinstance(body, dict):
                    raise PatchError("a merge patch must be a JSON object")
                new = merge_patch(current, body)
            elif patch_type == "strategic":
                if not isinstance(body, dict):
                    raise PatchError("a strategic merge patch must be a JSON object")
                if rt.crd is not None:
                    raise ApiError(
                        415, "UnsupportedMediaType",
                        "strategic merge patch is not supported for custom resources",
                    )
                new = strategic_merge(current, body)
            elif patch_type == "json":
                new = json_patch(current, body)
            else:
                raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {patch_type}")
        except PatchError as exc:
            raise ApiError(422, "Invalid", str(exc)) from exc
        if not isinstance(new, dict):
            raise ApiError(422, "Invalid", "the patch did not produce an object")
        precondition = False
        if isinstance(body, dict):
            prv = (body.get("metadata") or {}).get("resourceVersion")
            precondition = bool(prv)
        if not precondition:
            new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
        if subresource == "status":
            return self.update(rt, namespace, name, new, "status", dry_run, precondition)
        if subresource is None and "status" in rt.subresources:
            new["status"] = old.get("status", {})
        return self.update(rt, namespace, name, new, subresource, dry_run, precondition)

    def _apply(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        old: Obj | None,
        body: Any,
        subresource: str | None,
        manager: str | None,
        force: bool,
        dry_run: bool,
    ) -> Obj:
        if not manager:
            raise ApiError(422, "Invalid",
                           "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required "
                           "value: is required for apply patch")
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "an apply patch must be an object")
        applied = copy.deepcopy(body)
        applied_meta = applied.setdefault("metadata", {})
        if applied_meta.get("name") and applied_meta["name"] != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
        applied_meta["name"] = name
        if rt.namespaced:
            applied_meta["namespace"] = ns
        if old is None:
            if subresource:
                raise not_found(rt, name)
            obj = copy.deepcopy(applied)
            obj["metadata"]["managedFields"] = [self._managed(manager, rt, subresource)]
            stored = self.create(rt, obj, ns or None, dry_run)
            if not dry_run:
                self.applied[(stored["metadata"]["uid"], manager)] = applied
            return stored
        uid = old["metadata"]["uid"]
        paths = leaf_paths({k: v for k, v in applied.items() if k not in ("apiVersion", "kind")})
        paths.pop(("metadata", "name"), None)
        paths.pop(("metadata", "namespace"), None)
        if not force:
            current = leaf_paths(old)
            conflicts = []
            for (other_uid, other), cfg in self.applied.items():
                if other_uid != uid or other == manager:
                    continue
                theirs = leaf_paths(cfg)
                for p, v in paths.items():
                    if p in theirs and theirs[p] != v and current.get(p) == theirs[p]:
                        conflicts.append((other, p))
            if conflicts:
                msg = "; ".join(f'conflict with "{m}": .{".".join(map(str, p))}'
                                for m, p in conflicts[:5])
                raise ApiError(
                    409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): {msg}",
                    {"causes": [{"reason": "FieldManagerConflict",
                                 "message": f'conflict with "{m}"',
                                 "field": "." + ".".join(map(str, p))} for m, p in conflicts]},
                )
        merged = copy.deepcopy(old)
        previous = self.applied.get((uid, manager))
        if previous is not None:
            gone = set(leaf_paths(previous)) - set(paths)
            others = set()
            for (other_uid, other), cfg in self.applied.items():
                if other_uid == uid and other != manager:
                    others |= set(leaf_paths(cfg))
            for p in sorted(gone - others, key=len, reverse=True):
                remove_path(merged, p)
        if force:
            for (other_uid, other), cfg in list(self.applied.items()):
                if other_uid == uid and other != manager:
                    kept = copy.deepcopy(cfg)
                    for p in paths:
                        remove_path(kept, p)
                    self.applied[(other_uid, other)] = kept
        body_no_rv = copy.deepcopy(applied)
        rv = body_no_rv["metadata"].pop("resourceVersion", None)
        merged = strategic_merge(merged, body_no_rv)
        managers = [m for m in merged["metadata"].get("managedFields") or ()
                    if m.get("manager") != manager]
        managers.append(self._managed(manager, rt, subresource))
        merged["metadata"]["managedFields"] = managers
        merged["metadata"]["resourceVersion"] = rv or old["metadata"]["resourceVersion"]
        if subresource is None and "status" in rt.subresources:
            merged["status"] = old.get("status", {})
        result = self.update(rt, ns, name, merged, subresource, dry_run, bool(rv))
        if not dry_run:
            self.applied[(uid, manager)] = applied
        return result

    @staticmethod
    def _managed(manager: str, rt: ResourceType, subresource: str | None) -> Obj:
        entry: Obj = {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": rt.api_version,
            "time": now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        if subresource:
            entry["subresource"] = subresource
        return entry

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        propagation: str = "Background",
        dry_run: bool = False,
        precondition_rv: str | None = None,
        precondition_uid: str | None = None,
    ) -> Obj:
        ns = namespace if rt.namespaced else ""
        old = self.store.get(rt.key, ns, name)
        if old is None:
            raise not_found(rt, name)
        if (precondition_rv and precondition_rv != old["metadata"]["resourceVersion"]) or (
            precondition_uid and precondition_uid != old["metadata"]["uid"]
        ):
            raise ApiError(409, "Conflict", f'Precondition failed for {rt.plural} "{name}"')
        if dry_run:
            return old
        uid = old["metadata"]["uid"]
        removed = self.store.remove(rt, ns, name)
        assert removed is not None
        for key, dns, dname in self.store.dependents(uid):
            drt = self.store.registry.by_key.get(key)
            dep = self.store.get(key, dns, dname)
            if drt is None or dep is None:
                continue
            if propagation == "Orphan":
                new = copy.deepcopy(dep)
                new["metadata"]["ownerReferences"] = [
                    r for r in dep["metadata"].get("ownerReferences") or () if r.get("uid") != uid
                ]
                self.store.replace(drt, new, dep)
            else:
                self.delete(drt, dns, dname, propagation)
        if rt.key == NAMESPACES:
            for key in list(self.store.objects):
                krt = self.store.registry.by_key.get(key)
                if krt is None or not krt.namespaced:
                    continue
                for obj in self.store.list(key, name):
                    if self.store.get(key, name, obj["metadata"]["name"]) is not None:
                        self.delete(krt, name, obj["metadata"]["name"])
        for k in [k for k in self.applied if k[0] == uid]:
            del self.applied[k]
        return removed

    # -- pods/binding ----------------------------------------------------------

    def bind(self, namespace: str, name: str, node: str) -> None:
        rt = self.rt(PODS)
        pod = self.get(rt, namespace, name)
        if pod["spec"].get("nodeName"):
            raise ApiError(409, "Conflict",
                           f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        if node not in self.nodes:
            raise ApiError(404, "NotFound", f'nodes "{node}" not found')
        self._bind(pod, node)

    def _bind(self, pod: Obj, node: str) -> None:
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = node
        conds = [c for c in new["status"].get("conditions") or () if c["type"] != "PodScheduled"]
        conds.append(_condition("PodScheduled", "True"))
        new["status"]["conditions"] = conds
        self.unschedulable.discard((pod["metadata"].get("namespace", ""), pod["metadata"]["name"]))
        self.store.replace(self.rt(PODS), new, pod)

    # -- controller plumbing ---------------------------------------------------

    def start(self) -> None:
        """Start the controller worker on the running loop (idempotent)."""
        if self._worker is None or self._worker.done():
            self._wake = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._run())
            if self._queue:
                self._wake.set()

    async def stop(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        self.store.close_watches()
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None

    def enqueue(self, *item: str) -> None:
        self._queue[item] = None
        if self._wake is not None:
            self._wake.set()

    def _later(self, delay: float, *item: str) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self.enqueue(*item)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            done = 0
            while self._queue or self._retry_unschedulable:
                if self._retry_unschedulable and not self._queue:
                    self._retry_unschedulable = False
                    for ns, name in sorted(self.unschedulable):
                        self._queue[("schedule", ns, name)] = None
                    self.unschedulable.clear()
                    continue
                item = next(iter(self._queue))
                del self._queue[item]
                try:
                    self._handle(item)
                except ApiError as exc:
                    log.debug("sim %s: %s: %s", self.name, item, exc.message)
                except Exception:
                    log.exception("sim %s: controller failed on %s", self.name, item)
                done += 1
                if done % 200 == 0:
                    await asyncio.sleep(0)

    def _handle(self, item: tuple[str, ...]) -> None:
        what = item[0]
        if what == "schedule":
            self._schedule(item[1], item[2])
        elif what == "start":
            self._start_pod(item[1], item[2], item[3])
        elif what == "finish":
            self._finish_pod(item[1], item[2], item[3])
        elif what == DEPLOYMENTS:
            self._reconcile_deployment(item[1], item[2])
        elif what == REPLICASETS:
            self._reconcile_replicaset(item[1], item[2])
        elif what == STATEFULSETS:
            self._reconcile_statefulset(item[1], item[2])
        elif what == DAEMONSETS:
            self._reconcile_daemonset(item[1], item[2])
        elif what == JOBS:
            self._reconcile_job(item[1], item[2])
        elif what == "daemonsets-all":
            for ds in self.store.list(DAEMONSETS):
                self.enqueue(DAEMONSETS, ds["metadata"]["namespace"], ds["metadata"]["name"])

    def _on_event(self, key: str, etype: str, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        name = meta["name"]
        if key == PODS:
            self._track_pod(etype, obj)
            ctl = controller_of(obj)
            if ctl and ctl.get("kind") in KIND_KEYS:
                self.enqueue(KIND_KEYS[ctl["kind"]], ns, str(ctl.get("name")))
        elif key == NODES:
            if etype == "DELETED":
                self._node_gone(name)
            else:
                self._refresh_node(obj)
                if etype == "ADDED" or (old is not None and old.get("metadata", {}).get(
                        "labels") != meta.get("labels")):
                    self.enqueue("daemonsets-all")
                if old is not None and old.get("status", {}).get("conditions") != obj.get(
                        "status", {}).get("conditions"):
                    self._sync_pod_readiness(name)
                    self.enqueue("daemonsets-all")
            if self._retry_unschedulable and self._wake is not None:
                self._wake.set()
        elif key in (DEPLOYMENTS, STATEFULSETS, DAEMONSETS, JOBS):
            if etype != "DELETED":
                self.enqueue(key, ns, name)
        elif key == REPLICASETS:
            if etype != "DELETED":
                self.enqueue(key, ns, name)
            ctl = controller_of(obj)
            if ctl and ctl.get("kind") == "Deployment":
                self.enqueue(DEPLOYMENTS, ns, str(ctl.get("name")))
        elif key == CRDS:
            self._crd_changed(etype, obj)

    # -- CRDs ------------------------------------------------------------------

    def _crd_changed(self, etype: str, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        gone = self.registry.remove_crd(name)
        if etype == "DELETED":
            keys = {rt.key for rt in gone}
            for rt in gone:
                if rt.key in keys:
                    keys.discard(rt.key)
                    for obj in self.store.list(rt.key):
                        self.store.remove(rt, obj["metadata"].get("namespace", ""),
                                          obj["metadata"]["name"])
            return
        spec = crd["spec"]
        names = spec["names"]
        for v in spec.get("versions") or ():
            if not v.get("served", True):
                continue
            subs = v.get("subresources") or {}
            rt = ResourceType(
                group=spec["group"],
                version=v["name"],
                kind=names["kind"],
                plural=names["plural"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=list(names.get("shortNames") or []),
                subresources=[s for s in ("status", "scale") if s in subs],
                categories=list(names.get("categories") or []),
                crd=name,
                printer_columns=list(v.get("additionalPrinterColumns") or []),
            )
            self.registry.add(rt)
        # the storage bucket is shared by versions: the storage version owns the key
        for v in spec.get("versions") or ():
            if v.get("storage"):
                rt_s = self.registry.get(spec["group"], v["name"], names["plural"])
                if rt_s is not None:
                    self.registry.by_key[rt_s.key] = rt_s

    # -- scheduling and the simulated kubelet ---------------------------------

    def _track_pod(self, etype: str, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        node = pod.get("spec", {}).get("nodeName")
        phase = pod.get("status", {}).get("phase")
        if etype == "DELETED" or not node or phase in ("Succeeded", "Failed"):
            self._release(key)
            if etype == "DELETED":
                self.unschedulable.discard(key)
            elif not node and phase == "Pending":
                sched = pod["spec"].get("schedulerName", "default-scheduler")
                if sched in DEFAULT_SCHEDULERS and key not in self.unschedulable:
                    self.enqueue("schedule", key[0], key[1])
            return
        if key not in self.pod_node:
            info = self.nodes.get(node)
            cpu, mem = pod_requests(pod)
            self.pod_node[key] = (node, cpu, mem)
            if info is not None:
                info.used_cpu += cpu
                info.used_memory += mem
                info.used_pods += 1
                info.pod_keys.add(key)
        if phase == "Pending" and not pod["status"].get("startTime"):
            self._later(self.pod_start_delay, "start", key[0], key[1], meta["uid"])

    def _release(self, key: tuple[str, str]) -> None:
        placed = self.pod_node.pop(key, None)
        if placed is None:
            return
        node, cpu, mem = placed
        info = self.nodes.get(node)
        if info is not None:
            info.used_cpu -= cpu
            info.used_memory -= mem
            info.used_pods -= 1
            info.pod_keys.discard(key)
        self._retry_unschedulable = bool(self.unschedulable)
        if self._retry_unschedulable and self._wake is not None:
            self._wake.set()

    def _schedule(self, ns: str, name: str) -> None:
        pod = self.store.get(PODS, ns, name)
        if pod is None or pod["spec"].get("nodeName") or pod["status"].get("phase") != "Pending":
            return
        if pod["spec"].get("schedulerName", "default-scheduler") not in DEFAULT_SCHEDULERS:
            return
        cpu, mem = pod_requests(pod)
        selector = pod["spec"].get("nodeSelector") or {}
        n = len(self.node_order)
        chosen = None
        for i in range(n):
            node = self.node_order[(self._rr + i) % n]
            info = self.nodes[node]
            if not info.fits(cpu, mem):
                continue
            if selector and any(info.labels.get(k) != v for k, v in selector.items()):
                continue
            chosen = node
            self._rr = (self._rr + i + 1) % n
            break
        if chosen is not None:
            self._bind(pod, chosen)
            return
        self.unschedulable.add((ns, name))
        msg = (f"0/{n} nodes are available: insufficient resources or no node matches "
               f"(requests cpu={format_cpu(cpu)}, memory={format_bytes(mem)}).")
        for c in pod["status"].get("conditions") or ():
            if c["type"] == "PodScheduled" and c.get("message") == msg:
                return
        new = copy.deepcopy(pod)
        conds = [c for c in new["status"].get("conditions") or () if c["type"] != "PodScheduled"]
        conds.append(_condition("PodScheduled", "False", "Unschedulable", msg))
        new["status"]["conditions"] = conds
        self.store.replace(self.rt(PODS), new, pod)

    def _start_pod(self, ns: str, name: str, uid: str) -> None:
        pod = self.store.get(PODS, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        node = pod["spec"].get("nodeName")
        if pod["status"].get("phase") != "Pending" or not node:
            return
        new = copy.deepcopy(pod)
        ts = now()
        self._ip += 1
        pod_ip = f"10.244.{(self._ip >> 8) & 255}.{self._ip & 255}"
        node_obj = self.store.get(NODES, "", node)
        host_ip = ""
        if node_obj is not None:
            for a in node_obj.get("status", {}).get("addresses") or ():
                if a.get("type") == "InternalIP":
                    host_ip = a["address"]
        ready = "True" if self._node_ready(node) else "False"
        new["status"].update(
            phase="Running",
            startTime=ts,
            podIP=pod_ip,
            podIPs=[{"ip": pod_ip}],
            hostIP=host_ip,
            hostIPs=[{"ip": host_ip}] if host_ip else [],
            conditions=[
                _condition("PodReadyToStartContainers", "True"),
                _condition("Initialized", "True"),
                _condition("Ready", ready),
                _condition("ContainersReady", ready),
                _condition("PodScheduled", "True"),
            ],
            containerStatuses=[
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": f"sim://{c.get('image', '')}",
                    "containerID": f"sim://{secrets.token_hex(8)}",
                    "ready": ready == "True",
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": ts}},
                }
                for c in new["spec"].get("containers") or ()
            ],
        )
        self.store.replace(self.rt(PODS), new, pod)
        duration = self._run_duration(new)
        if duration is not None:
            self._later(duration, "finish", ns, name, uid)

    def _run_duration(self, pod: Obj) -> float | None:
        ann = pod["metadata"].get("annotations") or {}
        if "sim.shoal.dev/run-seconds" in ann:
            try:
                return float(ann["sim.shoal.dev/run-seconds"])
            except ValueError:
                return None
        ctl = controller_of(pod)
        if ctl and ctl.get("kind") == "Job":
            return self.job_duration
        return None

    def _finish_pod(self, ns: str, name: str, uid: str) -> None:
        pod = self.store.get(PODS, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") != "Running":
            return
        new = copy.deepcopy(pod)
        ts = now()
        new["status"]["phase"] = "Succeeded"
        for c in new["status"].get("conditions") or ():
            if c["type"] in ("Ready", "ContainersReady"):
                c.update(status="False", reason="PodCompleted", lastTransitionTime=ts)
        for cs in new["status"].get("containerStatuses") or ():
            started = cs.get("state", {}).get("running", {}).get("startedAt", ts)
            cs.update(ready=False, started=False, state={"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": ts}})
        self.store.replace(self.rt(PODS), new, pod)

    def _node_ready(self, node: str) -> bool:
        fault = self.node_faults.get(node)
        return not (fault and fault.not_ready)

    def _sync_pod_readiness(self, node: str) -> None:
        info = self.nodes.get(node)
        if info is None:
            return
        obj = self.store.get(NODES, "", node)
        ready = True
        for c in (obj or {}).get("status", {}).get("conditions") or ():
            if c.get("type") == "Ready":
                ready = c.get("status") == "True"
        want = "True" if ready else "False"
        for ns, name in list(info.pod_keys):
            pod = self.store.get(PODS, ns, name)
            if pod is None or pod["status"].get("phase") != "Running":
                continue
            if any(c["type"] == "Ready" and c["status"] == want
                   for c in pod["status"].get("conditions") or ()):
                continue
            new = copy.deepcopy(pod)
            for c in new["status"].get("conditions") or ():
                if c["type"] in ("Ready", "ContainersReady"):
                    c.update(status=want, lastTransitionTime=now())
            for cs in new["status"].get("containerStatuses") or ():
                cs["ready"] = ready
            self.store.replace(self.rt(PODS), new, pod)

    def _node_gone(self, node: str) -> None:
        info = self.nodes.pop(node, None)
        if node in self.node_order:
            self.node_order.remove(node)
        if info is None:
            return
        self.enqueue("daemonsets-all")
        rt = self.rt(PODS)
        for ns, name in list(info.pod_keys):
            self.pod_node.pop((ns, name), None)
            if self.store.get(PODS, ns, name) is not None:
                self.delete(rt, ns, name)

    # -- workload controllers ----------------------------------------------------

    def _owned(self, owner: Obj, key: str) -> list[Obj]:
        out = []
        for k, ns, name in self.store.dependents(owner["metadata"]["uid"]):
            if k == key:
                obj = self.store.get(k, ns, name)
                if obj is not None:
                    out.append(obj)
        return out

    @staticmethod
    def _owner_ref(owner: Obj) -> Obj:
        return {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _new_pod(self, owner: Obj, template: Obj, name: str | None = None,
                 extra_labels: dict[str, str] | None = None, node: str | None = None) -> Obj:
        meta = copy.deepcopy(template.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        labels.update(extra_labels or {})
        pod_meta: Obj = {
            "namespace": owner["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [self._owner_ref(owner)],
        }
        if meta.get("annotations"):
            pod_meta["annotations"] = meta["annotations"]
        if name:
            pod_meta["name"] = name
        else:
            pod_meta["generateName"] = owner["metadata"]["name"] + "-"
        spec = copy.deepcopy(template.get("spec") or {})
        if node:
            spec["nodeName"] = node
        return self.create(self.rt(PODS), {"apiVersion": "v1", "kind": "Pod",
                                           "metadata": pod_meta, "spec": spec})

    def _set_status(self, key: str, obj: Obj, status: Obj) -> None:
        merged = dict(obj.get("status") or {})
        merged.update(status)
        if merged == obj.get("status"):
            return
        new = dict(obj)
        new["metadata"] = dict(obj["metadata"])
        new["status"] = merged
        self.store.replace(self.rt(key), new, obj)

    def _reconcile_deployment(self, ns: str, name: str) -> None:
        d = self.store.get(DEPLOYMENTS, ns, name)
        if d is None:
            return
        spec = d["spec"]
        desired = int(spec.get("replicas", 1))
        h = template_hash(spec["template"])
        rss = self._owned(d, REPLICASETS)
        current = next((rs for rs in rss if rs["metadata"].get("labels", {}).get(
            "pod-template-hash") == h), None)
        if current is None:
            template = copy.deepcopy(spec["template"])
            tmeta = template.setdefault("metadata", {})
            tmeta["labels"] = dict(tmeta.get("labels") or {}, **{"pod-template-hash": h})
            selector = copy.deepcopy(spec["selector"])
            selector.setdefault("matchLabels", {})["pod-template-hash"] = h
            current = self.create(self.rt(REPLICASETS), {
                "metadata": {
                    "name": f"{name}-{h}",
                    "namespace": ns,
                    "labels": tmeta["labels"],
                    "annotations": {"deployment.kubernetes.io/desired-replicas": str(desired)},
                    "ownerReferences": [self._owner_ref(d)],
                },
                "spec": {"replicas": desired, "selector": selector, "template": template},
            })
        elif current["spec"].get("replicas") != desired:
            new = copy.deepcopy(current)
            new["spec"]["replicas"] = desired
            current = self.store.replace(self.rt(REPLICASETS), new, current)
        for rs in rss:
            if rs is not current and rs["metadata"]["uid"] != current["metadata"]["uid"]:
                self.delete(self.rt(REPLICASETS), ns, rs["metadata"]["name"])
        st = current.get("status") or {}
        ready = int(st.get("readyReplicas", 0))
        replicas = int(st.get("replicas", 0))
        available = int(st.get("availableReplicas", 0))
        gen = d["metadata"].get("generation", 1)
        conds = [
            _condition("Available", "True" if available >= desired else "False",
                       "MinimumReplicasAvailable" if available >= desired
                       else "MinimumReplicasUnavailable",
                       "Deployment has minimum availability." if available >= desired
                       else "Deployment does not have minimum availability."),
            _condition("Progressing", "True",
                       "NewReplicaSetAvailable" if ready >= desired else "ReplicaSetUpdated",
                       f'ReplicaSet "{current["metadata"]["name"]}" has '
                       + ("successfully progressed." if ready >= desired else "is progressing.")),
        ]
        old_conds = (d.get("status") or {}).get("conditions") or []
        if [(c["type"], c["status"], c.get("reason")) for c in old_conds] == [
                (c["type"], c["status"], c.get("reason")) for c in conds]:
            conds = old_conds
        status: Obj = {
            "observedGeneration": gen,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": available,
            "conditions": conds,
        }
        if desired - available > 0:
            status["unavailableReplicas"] = desired - available
        elif "unavailableReplicas" in (d.get("status") or {}):
            status["unavailableReplicas"] = 0
        self._set_status(DEPLOYMENTS, d, status)

    def _reconcile_replicaset(self, ns: str, name: str) -> None:
        rs = self.store.get(REPLICASETS, ns, name)
        if rs is None:
            return
        desired = int(rs["spec"].get("replicas", 1))
        pods = [p for p in self._owned(rs, PODS) if _active(p)]
        if len(pods) < desired:
            for _ in range(desired - len(pods)):
                pods.append(self._new_pod(rs, rs["spec"]["template"]))
        elif len(pods) > desired:
            pods.sort(key=lambda p: (pod_ready(p), bool(p["spec"].get("nodeName"))))
            for p in pods[: len(pods) - desired]:
                self.delete(self.rt(PODS), ns, p["metadata"]["name"])
            pods = pods[len(pods) - desired:]
        ready = sum(1 for p in pods if pod_ready(p))
        self._set_status(REPLICASETS, rs, {
            "replicas": len(pods),
            "fullyLabeledReplicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        })

    def _reconcile_statefulset(self, ns: str, name: str) -> None:
        sts = self.store.get(STATEFULSETS, ns, name)
        if sts is None:
            return
        desired = int(sts["spec"].get("replicas", 1))
        h = template_hash(sts["spec"]["template"])
        revision = f"{name}-{h}"
        pods = {p["metadata"]["name"]: p for p in self._owned(sts, PODS)}
        for pname, p in list(pods.items()):
            idx = pname.rsplit("-", 1)[-1]
            stale = p["metadata"].get("labels", {}).get("controller-revision-hash") != revision
            if not idx.isdigit() or int(idx) >= desired or stale or not _active(p):
                self.delete(self.rt(PODS), ns, pname)
                del pods[pname]
        for i in range(desired):
            pname = f"{name}-{i}"
            if pname not in pods and self.store.get(PODS, ns, pname) is None:
                pods[pname] = self._new_pod(sts, sts["spec"]["template"], pname, {
                    "controller-revision-hash": revision,
                    "statefulset.kubernetes.io/pod-name": pname,
                    "apps.kubernetes.io/pod-index": str(i),
                })
        ready = sum(1 for p in pods.values() if pod_ready(p))
        self._set_status(STATEFULSETS, sts, {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": len(pods),
            "updatedReplicas": len(pods),
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        })

    def _reconcile_daemonset(self, ns: str, name: str) -> None:
        ds = self.store.get(DAEMONSETS, ns, name)
        if ds is None:
            return
        template = ds["spec"]["template"]
        h = template_hash(template)
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        wanted = {
            n for n, info in self.nodes.items()
            if info.schedulable and all(info.labels.get(k) == v for k, v in selector.items())
        }
        have: dict[str, Obj] = {}
        for p in self._owned(ds, PODS):
            node = p["spec"].get("nodeName")
            stale = p["metadata"].get("labels", {}).get("controller-revision-hash") != h
            if node not in wanted or node in have or stale or not _active(p):
                if node not in wanted and node in self.nodes and _active(p) and not stale:
                    # a node that only went NotReady keeps its daemon pod
                    have[str(node)] = p
                    continue
                self.delete(self.rt(PODS), ns, p["metadata"]["name"])
            else:
                have[str(node)] = p
        for node in sorted(wanted - set(have)):
            have[node] = self._new_pod(ds, template, None, {"controller-revision-hash": h},
                                       node)
        ready = sum(1 for p in have.values() if pod_ready(p))
        self._set_status(DAEMONSETS, ds, {
            "observedGeneration": ds["metadata"].get("generation", 1),
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": len(have),
            "updatedNumberScheduled": len(have),
            "numberReady": ready,
            "numberAvailable": ready,
            "numberMisscheduled": 0,
            **({"numberUnavailable": len(wanted) - ready} if len(wanted) > ready else {}),
        })

    def _reconcile_job(self, ns: str, name: str) -> None:
        job = self.store.get(JOBS, ns, name)
        if job is None:
            return
        spec = job["spec"]
        completions = int(spec.get("completions") or 1)
        parallelism = int(spec.get("parallelism", 1))
        pods = self._owned(job, PODS)
        succeeded = sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
        failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
        active = [p for p in pods if _active(p)]
        status: Obj = {"startTime": (job.get("status") or {}).get("startTime") or now()}
        complete = succeeded >= completions
        if not complete and not spec.get("suspend"):
            want = min(parallelism, completions - succeeded)
            for _ in range(want - len(active)):
                active.append(self._new_pod(job, spec["template"]))
        ready = sum(1 for p in active if pod_ready(p))
        status.update(active=len(active), succeeded=succeeded, failed=failed, ready=ready,
                      terminating=0)
        if complete and not (job.get("status") or {}).get("completionTime"):
            ts = now()
            status["completionTime"] = ts
            status["conditions"] = [
                _condition("SuccessCriteriaMet", "True", "CompletionsReached",
                           "Reached expected number of succeeded pods"),
                _condition("Complete", "True", "CompletionsReached",
                           "Reached expected number of succeeded pods"),
            ]
            status["active"] = 0
        self._set_status(JOBS, job, status)

    # -- faults -------------------------------------------------------------

    def set_unreachable(self, unreachable: bool) -> None:
        self.unreachable = unreachable
        if unreachable:
            self.store.close_watches()

    def set_node_fault(
        self,
        node: str,
        not_ready: bool | None = None,
        memory_pressure: bool | None = None,
        removed: bool | None = None,
    ) -> None:
        """Change the simulated health of one node; None leaves that aspect unchanged."""
        fault = self.node_faults.get(node) or NodeFault()
        if node not in self.nodes and node not in self.removed_nodes:
            raise KeyError(node)
        if not_ready is not None:
            fault.not_ready = not_ready
        if memory_pressure is not None:
            fault.memory_pressure = memory_pressure
        if removed is not None and removed != fault.removed:
            fault.removed = removed
            if removed:
                obj = self.store.get(NODES, "", node)
                if obj is not None:
                    self.removed_nodes[node] = obj
                    self.delete(self.rt(NODES), "", node)
            else:
                saved = self.removed_nodes.pop(node, None)
                base = copy.deepcopy(saved) if saved else self.node_object(node)
                self.add_node(node, base)
        if fault.not_ready or fault.memory_pressure or fault.removed:
            self.node_faults[node] = fault
        else:
            self.node_faults.pop(node, None)
        if fault.removed:
            return
        obj = self.store.get(NODES, "", node)
        if obj is None:
            return
        new = copy.deepcopy(obj)
        new["status"]["conditions"] = self._node_conditions(fault)
        taints = [t for t in new["spec"].get("taints") or ()
                  if not t.get("key", "").startswith("node.kubernetes.io/")]
        if fault.not_ready:
            taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        if fault.memory_pressure:
            taints.append({"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"})
        if taints:
            new["spec"]["taints"] = taints
        else:
            new["spec"].pop("taints", None)
        self.store.replace(self.rt(NODES), new, obj)

    def clear_faults(self, node: str | None = None) -> None:
        if node is None:
            self.set_unreachable(False)
            nodes = list(self.node_faults)
        else:
            nodes = [node] if node in self.node_faults else []
        for n in nodes:
            self.set_node_fault(n, not_ready=False, memory_pressure=False, removed=False)

    def faults(self) -> Obj:
        return {
            "unreachable": self.unreachable,
            "nodes": {
                n: {k: v for k, v in vars(f).items() if v}
                for n, f in sorted(self.node_faults.items())
            },
        }

    def summary(self) -> Obj:
        ready = sum(1 for n in self.nodes if self._node_ready(n))
        return {
            "name": self.name,
            "nodes": len(self.nodes),
            "ready_nodes": ready,
            "pods": len(self.store.objects.get(PODS, {})),
            "resource_version": self.store.rv,
            "faults": self.faults(),
        }


def parse_patch_type(content_type: str) -> str:
    base = content_type.split(";")[0].strip().lower()
    kind = PATCH_TYPES.get(base)
    if kind is None:
        raise ApiError(415, "UnsupportedMediaType",
                       f"the body of the request was in an unknown format - accepted media "
                       f"types include: {', '.join(PATCH_TYPES)}")
    return kind


__all__ = ["ApiError", "Callable", "SimCluster", "parse_patch_type"]
