"""Resource amounts as integers: cpu in millicores, everything else in its base unit.

Quantities are rounded up, as Kubernetes rounds them, so that a fit check never lets a
fraction slip through. What a pod takes from its node follows Kubernetes: the larger of its
containers' sum and its largest init container, plus overhead, plus one pod slot.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from shoal.machinery.quantity import exact, format_bytes, format_cpu

Amounts = dict[str, int]

CPU = "cpu"
PODS = "pods"
BYTES = ("memory", "ephemeral-storage", "storage")


def amount(resource: str, value: object) -> int:
    """One quantity as an integer amount of ``resource`` (millicores for cpu); 0 unreadable."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        return _amount(resource, value)  # pods repeat a few quantities: each parsed once
    return _parse(resource, value)


def _parse(resource: str, value: object) -> int:
    try:
        quantity = exact(value)
    except ValueError:
        return 0  # what a member cluster reports unreadably counts as nothing
    return math.ceil(quantity * 1000) if resource == CPU else math.ceil(quantity)


@functools.lru_cache(maxsize=4096)
def _amount(resource: str, value: str | int) -> int:
    return _parse(resource, value)


def amounts(values: Mapping[str, Any] | None) -> Amounts:
    return {name: amount(name, value) for name, value in (values or {}).items()}


def format_amount(resource: str, value: int) -> str:
    """An amount as a quantity: "250m" cpu, "512Gi" memory, "110" pods."""
    if resource == CPU:
        return format_cpu(value)
    if resource in BYTES or resource.startswith("hugepages-"):
        return format_bytes(value)
    return str(value)


def add(total: Amounts, more: Mapping[str, int], sign: int = 1) -> None:
    """``total += sign * more`` in place; names that drop to zero go away."""
    for name, value in more.items():
        left = total.get(name, 0) + sign * value
        if left:
            total[name] = left
        else:
            total.pop(name, None)


def container_requests(container: Mapping[str, Any]) -> Amounts:
    """Requests of one container; a limit stands in for a missing request, as in Kubernetes."""
    resources = container.get("resources") or {}
    limits = amounts(resources.get("limits"))
    return {**limits, **amounts(resources.get("requests"))}


def pod_requests(spec: Mapping[str, Any]) -> Amounts:
    """What a pod takes from its node: max(sum of containers, largest init container) + overhead.

    Every pod also takes one of the node's ``pods`` slots.
    """
    total: Amounts = {}
    for container in spec.get("containers") or ():
        add(total, container_requests(container))
    for init in spec.get("initContainers") or ():
        for name, value in container_requests(init).items():
            total[name] = max(total.get(name, 0), value)
    add(total, amounts(spec.get("overhead")))
    total[PODS] = 1
    return total


def fits(requested: Mapping[str, int], allocatable: Mapping[str, int],
         more: Mapping[str, int]) -> str | None:
    """The first resource that ``more`` would push over ``allocatable``, or None."""
    for name, value in more.items():
        if value and requested.get(name, 0) + value > allocatable.get(name, 0):
            return name
    return None
