"""Server-side printing (``meta.k8s.io/v1 Table``) so ``kubectl get`` shows the usual columns."""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

from shoal.machinery.types import Obj
from shoal.sim.resources import ResourceType

Column = tuple[str, str, Callable[[Obj], Any], int]  # name, type, getter, priority


def _age(obj: Obj) -> str:
    ts = obj.get("metadata", {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    try:
        created = calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return "<unknown>"
    return human_duration(max(0, int(time.time() - created)))


def human_duration(s: int) -> str:
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    return f"{h // 24}d"


def _get(obj: Obj, *path: str, default: Any = None) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict):
            return default
        cur = cur.get(p)
    return default if cur is None else cur


def _pod_status(pod: Obj) -> str:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    phase = str(_get(pod, "status", "phase", default="Pending"))
    for cs in _get(pod, "status", "containerStatuses", default=[]):
        term = _get(cs, "state", "terminated")
        if term and phase != "Running":
            return str(term.get("reason") or phase)
    return phase


def _pod_ready(pod: Obj) -> str:
    total = len(_get(pod, "spec", "containers", default=[]))
    ready = sum(1 for cs in _get(pod, "status", "containerStatuses", default=[]) if cs.get("ready"))
    return f"{ready}/{total}"


def _node_status(node: Obj) -> str:
    status = "Unknown"
    for c in _get(node, "status", "conditions", default=[]):
        if c.get("type") == "Ready":
            status = "Ready" if c.get("status") == "True" else "NotReady"
    if _get(node, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _node_roles(node: Obj) -> str:
    roles = [k.split("/", 1)[1] for k in _get(node, "metadata", "labels", default={})
             if k.startswith("node-role.kubernetes.io/")]
    return ",".join(sorted(roles)) or "<none>"


def _internal_ip(node: Obj) -> str:
    for a in _get(node, "status", "addresses", default=[]):
        if a.get("type") == "InternalIP":
            return str(a.get("address"))
    return "<none>"


def _ports(svc: Obj) -> str:
    out = []
    for p in _get(svc, "spec", "ports", default=[]):
        s = str(p.get("port"))
        if p.get("nodePort"):
            s += f":{p['nodePort']}"
        out.append(f"{s}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _job_status(job: Obj) -> str:
    for c in _get(job, "status", "conditions", default=[]):
        if c.get("type") == "Complete" and c.get("status") == "True":
            return "Complete"
        if c.get("type") == "Failed" and c.get("status") == "True":
            return "Failed"
    return "Running"


def _node_selector(ds: Obj) -> str:
    sel = _get(ds, "spec", "template", "spec", "nodeSelector", default={})
    return ",".join(f"{k}={v}" for k, v in sel.items()) or "<none>"


NAME: Column = ("Name", "string", lambda o: o["metadata"]["name"], 0)
AGE: Column = ("Age", "string", _age, 0)

COLUMNS: dict[str, list[Column]] = {
    "/pods": [
        NAME,
        ("Ready", "string", _pod_ready, 0),
        ("Status", "string", _pod_status, 0),
        ("Restarts", "string", lambda o: str(sum(
            cs.get("restartCount", 0) for cs in _get(o, "status", "containerStatuses", default=[])
        )), 0),
        AGE,
        ("IP", "string", lambda o: _get(o, "status", "podIP", default="<none>"), 1),
        ("Node", "string", lambda o: _get(o, "spec", "nodeName", default="<none>"), 1),
    ],
    "/nodes": [
        NAME,
        ("Status", "string", _node_status, 0),
        ("Roles", "string", _node_roles, 0),
        AGE,
        ("Version", "string", lambda o: _get(o, "status", "nodeInfo", "kubeletVersion",
                                             default=""), 0),
        ("Internal-IP", "string", _internal_ip, 1),
    ],
    "/namespaces": [NAME, ("Status", "string", lambda o: _get(o, "status", "phase",
                                                              default=""), 0), AGE],
    "/services": [
        NAME,
        ("Type", "string", lambda o: _get(o, "spec", "type", default="ClusterIP"), 0),
        ("Cluster-IP", "string", lambda o: _get(o, "spec", "clusterIP", default="<none>"), 0),
        ("External-IP", "string", lambda o: "<none>", 0),
        ("Port(s)", "string", _ports, 0),
        AGE,
    ],
    "/configmaps": [NAME, ("Data", "integer", lambda o: len(o.get("data") or {})
                           + len(o.get("binaryData") or {}), 0), AGE],
    "/secrets": [NAME, ("Type", "string", lambda o: o.get("type", "Opaque"), 0),
                 ("Data", "integer", lambda o: len(o.get("data") or {}), 0), AGE],
    "apps/deployments": [
        NAME,
        ("Ready", "string", lambda o: f"{_get(o, 'status', 'readyReplicas', default=0)}/"
                                      f"{_get(o, 'spec', 'replicas', default=1)}", 0),
        ("Up-to-date", "integer", lambda o: _get(o, "status", "updatedReplicas", default=0), 0),
        ("Available", "integer", lambda o: _get(o, "status", "availableReplicas", default=0), 0),
        AGE,
    ],
    "apps/replicasets": [
        NAME,
        ("Desired", "integer", lambda o: _get(o, "spec", "replicas", default=1), 0),
        ("Current", "integer", lambda o: _get(o, "status", "replicas", default=0), 0),
        ("Ready", "integer", lambda o: _get(o, "status", "readyReplicas", default=0), 0),
        AGE,
    ],
    "apps/statefulsets": [
        NAME,
        ("Ready", "string", lambda o: f"{_get(o, 'status', 'readyReplicas', default=0)}/"
                                      f"{_get(o, 'spec', 'replicas', default=1)}", 0),
        AGE,
    ],
    "apps/daemonsets": [
        NAME,
        ("Desired", "integer", lambda o: _get(o, "status", "desiredNumberScheduled",
                                              default=0), 0),
        ("Current", "integer", lambda o: _get(o, "status", "currentNumberScheduled",
                                              default=0), 0),
        ("Ready", "integer", lambda o: _get(o, "status", "numberReady", default=0), 0),
        ("Up-to-date", "integer", lambda o: _get(o, "status", "updatedNumberScheduled",
                                                 default=0), 0),
        ("Available", "integer", lambda o: _get(o, "status", "numberAvailable", default=0), 0),
        ("Node Selector", "string", _node_selector, 0),
        AGE,
    ],
    "batch/jobs": [
        NAME,
        ("Status", "string", _job_status, 0),
        ("Completions", "string", lambda o: f"{_get(o, 'status', 'succeeded', default=0)}/"
                                            f"{_get(o, 'spec', 'completions', default=1)}", 0),
        AGE,
    ],
    "apiextensions.k8s.io/customresourcedefinitions": [
        NAME,
        ("Created At", "date", lambda o: o["metadata"].get("creationTimestamp", ""), 0),
    ],
}


def _json_path(obj: Obj, path: str) -> Any:
    path = path.strip().lstrip(".")
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1].lstrip(".")
    cur: Any = obj
    for part in path.split("."):
        if not part:
            continue
        if "[" in part and part.endswith("]"):
            name, idx = part[:-1].split("[", 1)
            cur = cur.get(name) if isinstance(cur, dict) else None
            if isinstance(cur, list):
                try:
                    cur = cur[int(idx)]
                except (ValueError, IndexError):
                    return None
            else:
                return None
        else:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return None
    return cur


def _getter(jp: str) -> Callable[[Obj], Any]:
    return lambda o: _json_path(o, jp)


def columns_for(rt: ResourceType) -> list[Column]:
    if rt.key in COLUMNS:
        return COLUMNS[rt.key]
    if rt.printer_columns:
        cols: list[Column] = [NAME]
        for pc in rt.printer_columns:
            jp = str(pc.get("jsonPath", ""))
            if pc.get("type") == "date" and jp.endswith("creationTimestamp"):
                cols.append((str(pc["name"]), "string", _age, int(pc.get("priority", 0))))
                continue
            cols.append((str(pc["name"]), str(pc.get("type", "string")), _getter(jp),
                         int(pc.get("priority", 0))))
        if not any(c[0] == "Age" for c in cols):
            cols.append(AGE)
        return cols
    return [NAME, AGE]


def table(rt: ResourceType, items: list[Obj], list_meta: Obj, include_object: str) -> Obj:
    cols = columns_for(rt)
    rows = []
    for obj in items:
        row: Obj = {"cells": [c[2](obj) for c in cols]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [
            {"name": c[0], "type": c[1], "format": "name" if c is NAME else "",
             "description": "", "priority": c[3]}
            for c in cols
        ],
        "rows": rows,
    }
