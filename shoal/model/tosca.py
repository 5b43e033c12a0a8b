"""TOSCA templates of clusters to be built on a cloud: checked with ``tosca-parser``.

``spec.tosca`` of a Cluster is a TOSCA Simple Profile template, inline (a
mapping), or a URL that Shoal reads only when the URL starts with one of the
prefixes in ``SHOAL_TOSCA_URLS`` (comma-separated; none by default, since an
API that fetches what users name reaches whatever it can reach). The API
checks an inline template at create and update; a URL is read by the
infrastructure controller when it builds the cluster.

``node_shape`` is what the ``sim`` provider understands of a template
(docs/clouds.md): the compute node templates, how many of each, how big.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

URLS_SETTING = "SHOAL_TOSCA_URLS"
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def allowed_url(url: str) -> bool:
    """Whether configuration allows reading a template from ``url``."""
    prefixes = [p.strip() for p in os.environ.get(URLS_SETTING, "").split(",") if p.strip()]
    return any(url.startswith(prefix) for prefix in prefixes)


def problems(template: dict[str, Any] | str) -> list[str]:
    """Why ``template`` is not a TOSCA template Shoal can build from; empty when it is."""
    if isinstance(template, str):
        if not re.match(r"^https?://", template) or not template.endswith((".yaml", ".yml")):
            return ["must be a TOSCA template (a mapping) or an http(s) URL of one, ending in "
                    ".yaml or .yml"]
        if not allowed_url(template):
            return [f"reading templates from URLs is not allowed here (set {URLS_SETTING})"]
        return []
    if not template:
        return []
    if not isinstance(template.get("tosca_definitions_version"), str):
        return ["tosca_definitions_version is required (tosca_simple_yaml_1_0 …)"]
    outputs = (template.get("topology_template") or {}).get("outputs") or {}
    if not isinstance(outputs, dict) or not outputs.get("kubeconfig"):
        return ["topology_template.outputs.kubeconfig is required: the built cluster's "
                "kubeconfig comes from it (and Krake's clients refuse a cluster without it)"]
    for entry in template.get("imports") or []:
        if "://" in str(entry):
            return ["imports from URLs are not read (give the types inline)"]
    # tosca-parser takes ~0.1 s to import: only the APIs that see a template pay it.
    from toscaparser.common.exception import ExceptionCollector, ValidationError
    from toscaparser.tosca_template import ToscaTemplate

    try:
        ToscaTemplate(yaml_dict_tpl=template, a_file=False)
    except ValidationError:
        found = [_message(error) for error in ExceptionCollector.getExceptions()]
        return found or ["is not a valid TOSCA template"]
    except Exception as error:  # tosca-parser raises bare errors on some malformed input
        return [f"is not a valid TOSCA template: {error}"]
    finally:
        ExceptionCollector.stop()
        ExceptionCollector.clear()
    return []


def _message(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error)
    return f"{type(error).__name__}: {text}".strip()


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one compute node template: how many, and each one's size."""

    name: str
    count: int
    cpu: str
    memory: str


def node_shape(template: dict[str, Any]) -> list[NodeGroup]:
    """The compute node templates of ``template`` (those with a ``host`` capability).

    ``host.properties.num_cpus`` and ``mem_size`` give each node's size (default
    2 cpus, 4 GB), and ``scalable.properties.default_instances`` how many (default 1;
    ``count``, the name IM's own node types use, is read too).
    """
    topology = template.get("topology_template") or {}
    groups = []
    for name, node in sorted((topology.get("node_templates") or {}).items()):
        capabilities = (node or {}).get("capabilities") or {}
        host = capabilities.get("host")
        if host is None and (node or {}).get("type") != "tosca.nodes.Compute":
            continue
        properties = (host or {}).get("properties") or {}
        scalable = (capabilities.get("scalable") or {}).get("properties") or {}
        groups.append(NodeGroup(
            name=name,
            count=int(scalable.get("default_instances", scalable.get("count", 1))),
            cpu=str(properties.get("num_cpus", 2)),
            memory=kubernetes_memory(properties.get("mem_size", "4 GB")),
        ))  # fmt: skip
    return groups


def kubernetes_memory(size: Any) -> str:
    """A TOSCA size (``4 GB``, ``512 MiB``) as a Kubernetes quantity in bytes."""
    found = _SIZE.match(str(size))
    if found is None:
        raise ValueError(f"not a TOSCA size: {size!r}")
    number, unit = found.groups()
    factor = _UNITS.get((unit or "B").upper())
    if factor is None:
        raise ValueError(f"unknown unit in TOSCA size {size!r}")
    return str(int(float(number) * factor))
