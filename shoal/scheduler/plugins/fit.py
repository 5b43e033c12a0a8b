"""A cluster holds an application only if its nodes hold its pods, node by node.

The observer reports what each node has left (``status.node_summary``'s
``room``); a pod fits a node when every resource it requests fits there, and a
cluster holds as many pods as fit its nodes one by one, rounded down (as
Karmada's general estimator counts). The application's own pods already on a
cluster count as room for it: a cluster full of them keeps them. A cluster the
observer has not summarised yet is not known to be full, and passes.
"""

from __future__ import annotations

import numpy as np

from shoal.machinery.resources import format_amount
from shoal.model.kubernetes import Cluster
from shoal.model.placement import largest_room
from shoal.scheduler.backends import Backend, BoolArray, Group
from shoal.scheduler.framework import Context, FilterPlugin, Request, register


def holds(backend: Backend, request: Request, pods: int) -> bool:
    """Whether the backend's nodes hold ``pods`` pods of the request, its own included."""
    free = backend.room(request.pod)
    return free is None or free + request.own.get(backend.name, 0) >= pods


def _amounts(pod: dict[str, int]) -> str:
    return ", ".join(f"{name} {format_amount(name, value)}" for name, value in pod.items())


def no_node(group: Group, keep: BoolArray, request: Request) -> str:
    """Why no node of the dropped clusters takes one pod: each resource the pod asks more
    of than the largest node's room, with that room (all of them when no one alone is)."""
    pod = {name: value for name, value in request.pod if value > 0}
    largest: dict[str, int] = {}
    for index in np.flatnonzero(~keep):
        obj = group.backends[int(index)].obj
        if not isinstance(obj, Cluster):
            continue
        for name, value in (largest_room(obj.status.node_summary) or {}).items():
            largest[name] = max(largest.get(name, 0), value)
    short = {name: value for name, value in pod.items() if value > largest.get(name, 0)}
    named = short or pod
    room = {name: largest.get(name, 0) for name in named}
    return (
        f"no node has room for one pod: it requests {_amounts(named)}, "
        f"the largest node has {_amounts(room)} left"
    )


@register("filters")
class NodeFit(FilterPlugin):
    """Drop clusters whose nodes cannot hold the application's pods (``request.pods``)."""

    name = "node-fit"

    def filter(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        request = ctx.request
        if not request.pod or request.pods <= 0:
            return []
        group = ctx.group
        out: list[tuple[str, BoolArray]] = []
        one = _mask(group, request, 1)
        if not one.all():
            out.append((no_node(group, one, request), one))
        if request.pods > 1:
            enough = _mask(group, request, request.pods)
            if not enough.all():
                out.append((f"room for fewer than {request.pods} pods", enough))
        return out


def _mask(group: Group, request: Request, pods: int) -> BoolArray:
    """Which backends hold ``pods`` pods: counted once per pod size and count for the
    group (applications alike share it), then the clusters with pods of this one."""
    pod = request.pod

    def fits(backend: Backend) -> bool:
        free = backend.room(pod)
        return free is None or free >= pods

    keep = group.mask(f"F:{pods}:{pod}", fits)
    if not request.own:
        return keep
    keep = keep.copy()
    for name in request.own:
        index = group.index.get((request.namespace, name))
        if index is not None:
            keep[index] = holds(group.backends[index], request, pods)
    return keep
