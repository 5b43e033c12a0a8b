"""What a TOSCA template's compute nodes become on a simulated cloud: how many nodes of
each template, each one's cpus and memory as Kubernetes quantities.

Read by the infrastructure's simulated provider; the template's checks are ``tosca``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


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
            count=instances(scalable.get("default_instances", scalable.get("count", 1))),
            cpu=str(properties.get("num_cpus", 2)),
            memory=kubernetes_memory(properties.get("mem_size", "4 GB")),
        ))  # fmt: skip
    return groups


def instances(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"not a number of instances: {value!r}")
    return int(value)


def kubernetes_memory(size: Any) -> str:
    """A TOSCA size (``4 GB``, ``512 MiB``) as a Kubernetes quantity in bytes."""
    found = SIZE.match(str(size))
    if found is None:
        raise ValueError(f"not a TOSCA size: {size!r}")
    number, unit = found.groups()
    factor = UNITS.get((unit or "B").upper())
    if factor is None:
        raise ValueError(f"unknown unit in TOSCA size {size!r}")
    return str(int(float(number) * factor))
