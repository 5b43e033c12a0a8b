"""The agent's node cache and node locks, rule by rule: what a node has left, which pods
count, reservations in flight, and one commit at a time per node."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shoal.agent.cache import NodeCache
from shoal.agent.locks import NodeBusy, NodeLocks
from shoal.agent.pod import UID_ANNOTATION
from shoal.testing.wait import wait_for


def _node(name: str, cpu: str = "2", *, ready: str | None = "True", **spec: Any) -> dict[str, Any]:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {"metadata": {"name": name, "labels": {"zone": "z1"}}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "pods": "10"}, "conditions": conditions}}


def _pod(name: str, node: str | None = "n-1", cpu: str = "500m", *, uid: str = "",
         phase: str = "Running", version: str | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if uid:
        meta["annotations"] = {UID_ANNOTATION: uid}
    if version is not None:
        meta["resourceVersion"] = version
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def _cache(*nodes: dict[str, Any]) -> NodeCache:
    cache = NodeCache()
    cache.replace_nodes(list(nodes) or [_node("n-1"), _node("n-2")])
    return cache


def test_a_node_as_the_cache_keeps_it() -> None:
    cache = NodeCache()
    cache.set_node(_node("n-1", taints=[{"key": "k", "effect": "NoSchedule"}],
                         unschedulable=True))  # fmt: skip
    info = cache.nodes["n-1"]
    assert (info.allocatable, info.labels, info.taints) == (
        {"cpu": 2000, "pods": 10}, {"zone": "z1"}, [{"key": "k", "effect": "NoSchedule"}])
    assert info.ready is True and info.unschedulable is True
    assert cache.names == ("n-1",) and cache.version == 1
    cache.set_node(_node("n-2", ready="False"))
    cache.set_node(_node("n-3", ready=None))  # no Ready condition: not ready
    assert [cache.nodes[n].ready for n in ("n-2", "n-3")] == [False, False]
    assert cache.nodes["n-2"].unschedulable is False and cache.nodes["n-2"].taints == []
    assert cache.names == ("n-1", "n-2", "n-3") and cache.version == 3
    cache.set_node(_node("n-1", cpu="4"))  # an update: same names, new version
    assert cache.names == ("n-1", "n-2", "n-3") and cache.version == 4
    assert cache.nodes["n-1"].allocatable["cpu"] == 4000
    cache.delete_node({"metadata": {"name": "n-2"}})
    assert cache.names == ("n-1", "n-3") and cache.version == 5
    cache.delete_node({"metadata": {"name": "gone"}})  # unknown: nothing changes
    assert cache.version == 5
    cache.replace_nodes([_node("n-9")])
    assert cache.names == ("n-9",) and list(cache.nodes) == ["n-9"]


def test_a_bound_pod_counts_until_it_finishes_or_goes() -> None:
    cache = _cache()
    cache.set_pod(_pod("a", cpu="500m", uid="u-a", version="7"))
    cache.set_pod(_pod("b", node=None))  # not bound: takes nothing
    cache.set_pod(_pod("c", phase="Succeeded"))  # finished: takes nothing
    cache.set_pod(_pod("d", phase="Failed"))
    cache.set_pod(_pod("e", phase="Pending", cpu="250m", version="5"))  # bound, not running
    assert cache.nodes["n-1"].available() == {"cpu": 1250, "pods": 8}
    assert cache.nodes["n-2"].available() == {"cpu": 2000, "pods": 10}
    assert cache.pod_version == 7 and cache.dirty == {"n-1"}
    assert cache.stats() == {"nodes": 2, "pods": 2, "reservations": 0}
    assert cache.committed("u-a") is not None and cache.committed("u-a").node == "n-1"
    assert cache.committed("u-x") is None
    # the same pod again (an update) replaces its contribution, never adds to it
    cache.set_pod(_pod("a", cpu="1", uid="u-a", version="8"))
    assert cache.nodes["n-1"].available()["cpu"] == 750 and cache.pod_version == 8
    # moved to another node: leaves the first
    cache.dirty.clear()
    cache.set_pod(_pod("a", node="n-2", cpu="1", uid="u-a", version="9"))
    assert cache.nodes["n-1"].available()["cpu"] == 1750
    assert cache.nodes["n-2"].available()["cpu"] == 1000 and cache.dirty == {"n-1", "n-2"}
    # it finishes: its resources are free again, its uid forgotten
    cache.set_pod(_pod("a", node="n-2", uid="u-a", phase="Succeeded", version="10"))
    assert cache.nodes["n-2"].available() == {"cpu": 2000, "pods": 10}
    assert cache.committed("u-a") is None
    cache.delete_pod(_pod("e", version="11"))
    assert cache.nodes["n-1"].available() == {"cpu": 2000, "pods": 10}
    assert cache.pod_version == 11 and cache.stats()["pods"] == 0
    cache.set_pod(_pod("old", version="3"))  # an older event never moves the version back
    cache.set_pod(_pod("odd", version="x"))
    assert cache.pod_version == 11


def test_a_reservation_counts_until_its_pod_replaces_it_or_it_is_released() -> None:
    cache = _cache()
    cache.reserve("default/a", "n-1", {"cpu": 500, "pods": 1}, "u-a")
    assert cache.nodes["n-1"].available() == {"cpu": 1500, "pods": 9}
    assert cache.find(["u-a"]) == {"u-a": ("default/a", cache.reservations["default/a"], True)}
    assert cache.committed("u-a") is None  # in flight: the cluster's name check covers it
    assert cache.made() == {"u-a": ("default/a", cache.reservations["default/a"], True)}
    # the create answered: the pod replaces the reservation, counted once
    cache.record(_pod("a", uid="u-a", version="4"))
    assert cache.reservations == {} and cache.nodes["n-1"].available() == {"cpu": 1500, "pods": 9}
    placed = cache.pods["default/a"]
    assert cache.find(["u-a", "u-x"]) == {"u-a": ("default/a", placed, False)}
    assert cache.made() == {"u-a": ("default/a", placed, False)}
    # the watch saw it first: recording the create again counts nothing more
    cache.record(_pod("a", uid="u-a", version="4"))
    assert cache.nodes["n-1"].available() == {"cpu": 1500, "pods": 9}
    # a create recorded after the watch moved past it (the pod went meanwhile): not counted
    cache.set_pod(_pod("z", node="n-2", cpu="1m", version="20"))
    cache.reserve("default/b", "n-1", {"cpu": 500, "pods": 1}, "u-b")
    cache.record(_pod("b", uid="u-b", version="12"))
    assert "default/b" not in cache.pods and cache.reservations == {}
    # newer than the watch, or without a version: counted until its own event
    cache.record(_pod("c", uid="u-c", version="21"))
    cache.record(_pod("d", uid="u-d"))
    assert {"default/c", "default/d"} <= set(cache.pods)
    # a failed create releases the reservation
    cache.reserve("default/e", "n-2", {"cpu": 700, "pods": 1}, "u-e")
    cache.release("default/e")
    assert cache.nodes["n-2"].available() == {"cpu": 1999, "pods": 9}
    cache.release("default/e")  # twice: nothing more
    assert cache.nodes["n-2"].available() == {"cpu": 1999, "pods": 9}


def test_a_fresh_list_keeps_the_reservations_in_flight() -> None:
    cache = _cache()
    cache.set_pod(_pod("gone", cpu="1", uid="u-gone", version="3"))
    cache.reserve("default/r", "n-2", {"cpu": 300, "pods": 1}, "u-r")
    before = cache.version
    cache.replace_pods([_pod("new", cpu="200m", uid="u-new")], 40)
    assert cache.nodes["n-1"].available() == {"cpu": 1800, "pods": 9}  # gone left, new came
    assert cache.nodes["n-2"].available() == {"cpu": 1700, "pods": 9}  # the reservation stays
    assert cache.committed("u-gone") is None and cache.committed("u-new") is not None
    assert cache.pod_version == 40 and cache.version == before + 1
    cache.replace_pods([], None)  # a list without a version keeps the one reached
    assert cache.pod_version == 40
    assert cache.find(["u-r"])["u-r"][2] is True
    # only the uids asked for, whether made or in flight
    assert cache.find(["u-x"]) == {}  # the reservation in flight is not another uid's
    assert cache.made() == {"u-r": ("default/r", cache.reservations["default/r"], True)}


async def test_one_holder_per_node_and_none_left_behind() -> None:
    locks = NodeLocks()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with locks.hold("n-1", 10):
            order.append("first in")
            first_in.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with locks.hold("n-1", 10):
            order.append("second in")

    async def other_node() -> None:
        await first_in.wait()
        async with locks.hold("n-2", 10):
            order.append("other node")

    tasks = [asyncio.create_task(f()) for f in (first, second, other_node)]
    await wait_for(lambda: "other node" in order and len(locks) == 1)
    assert order == ["first in", "other node"]  # n-2 was free while n-1 was held
    release.set()
    await asyncio.gather(*tasks)
    assert order == ["first in", "other node", "first out", "second in"]
    assert len(locks) == 0  # no lock kept for a node nobody holds


async def test_a_node_busy_past_the_timeout_refuses_and_forgets_the_waiter() -> None:
    locks = NodeLocks()
    held = asyncio.Event()
    done = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("n-1", 10):
            held.set()
            await done.wait()

    task = asyncio.create_task(holder())
    await held.wait()
    with pytest.raises(NodeBusy):  # the holder waits on an event: the lock cannot come free
        async with locks.hold("n-1", 0.05):
            pass
    assert len(locks) == 1  # the holder's lock only
    done.set()
    await task
    assert len(locks) == 0
    async with locks.hold("n-1", 0.05):  # free again: taken at once
        assert len(locks) == 1
