"""Churn: scheduler, kube controller and observer while the world keeps changing.

Three `shoal sim` clusters are relabelled, deleted and added again, made
unreachable and back, and their metrics change, one change about every
second, while applications run on them. Every application's history (each
write, from a watch) is then checked:

- no reason flips back (A → B → A, two different reasons) within a second:
  writers no longer overwrite each other's word;
- no lost write: each write changes the fields of one writer only (plus the
  derived state and reason), so none sends back another's fields stale;
- the final state follows the final world: every application RUNNING on an
  existing cluster that fits, where it is scheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections import defaultdict
from typing import Any

import pytest

from shoal.client.rest import Conflict, NotFound, ShoalClient
from shoal.model.application_status import OWNERS
from shoal.model.base import Metadata
from shoal.model.kubernetes import (
    Application,
    ApplicationState,
    Cluster,
    ClusterSpec,
    MetricRef,
)
from shoal.sim.server import SimServer
from shoal.testing.builders import app, register
from shoal.testing.shipped import Callers
from shoal.testing.sim import running_sim
from tests.scheduler import helpers as h
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAMES = ("c1", "c2", "c3")
APPS = 6
CHURN_SECONDS = 12.0
ACTIONS = ("relabel", "unreachable", "metrics", "delete")
OWNER = {field: owner for owner, fields in OWNERS.items() for field in fields}

History = dict[str, list[tuple[float, dict[str, Any]]]]


def _cluster(sim: SimServer, name: str, zone: str) -> Cluster:
    return Cluster(
        metadata=Metadata(name=name, namespace=h.NS, labels={"zone": zone}),
        spec=ClusterSpec(
            kubeconfig=sim.kubeconfig(name), metrics=[MetricRef(name=f"m-{name}", weight=1)]
        ),
    )


async def _record(client: ShoalClient, history: History, started: asyncio.Event) -> None:
    """Every write of every application, in order, with the time it was seen."""
    revision = (await client.list(Application, h.NS)).revision
    started.set()
    async for event in client.watch(Application, h.NS, resource_version=revision):
        obj = event.object
        history[obj.metadata.name].append(
            (time.monotonic(), obj.status.model_dump(mode="json"))
        )


CONFIG = h.fast_config(reschedule_after=30.0, backoff={"initial": 0.2, "cap": 1.0})


class World:
    """The changes of the churn, and what the world is after them."""

    def __init__(self, client: ShoalClient, sim: SimServer, seed: int) -> None:
        self.client, self.sim = client, sim
        self.random = random.Random(seed)
        self.zone = dict.fromkeys(NAMES, "x")
        self.present = set(NAMES)
        self.unreachable: set[str] = set()
        self.done: list[str] = []

    async def step(self) -> None:
        name = self.random.choice(NAMES)
        action = ACTIONS[len(self.done) % len(ACTIONS)]
        if name not in self.present:
            await register(self.client, _cluster(self.sim, name, self.zone[name]))
            self.present.add(name)
            action = "re-added"
        elif action == "relabel":
            self.zone[name] = "y" if self.zone[name] == "x" else "x"
            await self._relabel(name)
        elif action == "delete" and len(self.present) > 1:
            await self.client.delete(Cluster, name, h.NS)
            await wait_for(lambda: self._gone(name), timeout=5, message=f"{name} removed")
            self.present.discard(name)
        elif action == "unreachable":
            down = name not in self.unreachable
            self.sim.clusters.set_unreachable(name, down)
            (self.unreachable.add if down else self.unreachable.discard)(name)
        else:
            values = {f"m-{n}": self.random.random() for n in NAMES}
            await h.set_static(self.client, values)
            action = "metrics"
        self.done.append(f"{action} {name}")

    async def settle(self) -> None:
        """The final world: all reachable, all present, c1 in zone x."""
        for name in list(self.unreachable):
            self.sim.clusters.set_unreachable(name, False)
        self.unreachable.clear()
        for name in NAMES:
            if name not in self.present:
                await register(self.client, _cluster(self.sim, name, self.zone[name]))
                self.present.add(name)
        if self.zone["c1"] != "x":
            self.zone["c1"] = "x"
            await self._relabel("c1")

    async def _relabel(self, name: str) -> None:
        while True:
            cluster = await self.client.get(Cluster, name, h.NS)
            cluster.metadata.labels["zone"] = self.zone[name]
            try:
                await self.client.update(cluster)
                return
            except Conflict:
                continue

    async def _gone(self, name: str) -> bool:
        try:
            await self.client.get(Cluster, name, h.NS)
        except NotFound:
            return True
        return False


def _flip_backs(history: History) -> list[str]:
    found = []
    for name, writes in history.items():
        reasons: list[tuple[float, str | None]] = []
        for seen, status in writes:
            code = (status.get("reason") or {}).get("code")
            if not reasons or reasons[-1][1] != code:
                reasons.append((seen, code))
        for (_, a), (t1, b), (t2, c) in zip(reasons, reasons[1:], reasons[2:], strict=False):
            if a is not None and b is not None and a == c and a != b and t2 - t1 < 1.0:
                found.append(f"{name}: {a} → {b} → {a} in {t2 - t1:.2f} s")
    return found


def _mixed_writes(history: History) -> list[str]:
    """Writes that changed the fields of more than one writer (one would be sent back stale)."""
    found = []
    for name, writes in history.items():
        for (_, before), (_, after) in itertools.pairwise(writes):
            changed = {k for k in after if before.get(k) != after.get(k)}
            owners = {OWNER.get(k, "unknown") for k in changed} - {"derived"}
            if len(owners) > 1:
                found.append(f"{name}: one write changed {sorted(changed)}")
    return found


async def test_churn(client: ShoalClient, client_of: Callers) -> None:
    async with running_sim(clusters=list(NAMES), nodes=1, pod_start_delay=0.05) as sim:
        await h.static_metrics(client, {f"m-{n}": 0.5 for n in NAMES})
        for name in NAMES:
            await register(client, _cluster(sim, name, "x"))
        history: History = defaultdict(list)
        started = asyncio.Event()
        recorder = asyncio.create_task(_record(client, history, started))
        await started.wait()
        async with h.stack(client_of, CONFIG):
            for i in range(APPS):
                await client.create(app(f"app-{i}", labels=["zone is x"]))
            world = World(client, sim, seed=18)
            deadline = time.monotonic() + CHURN_SECONDS
            while time.monotonic() < deadline:
                await world.step()
                await asyncio.sleep(1.0)
            await world.settle()
            fits = {n for n in NAMES if world.zone[n] == "x"}

            async def consistent() -> list[Application] | None:
                apps = (await client.list(Application, h.NS)).items
                ok = all(
                    a.status.state is ApplicationState.RUNNING
                    and a.status.scheduled_to is not None
                    and a.status.scheduled_to.name in fits
                    and a.status.running_on == a.status.scheduled_to
                    and a.status.reason is None
                    for a in apps
                )
                return apps if ok and len(apps) == APPS else None

            await wait_for(consistent, timeout=15, message=f"settled after {world.done}")
        recorder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await recorder
    assert {a.split()[0] for a in world.done} >= {*ACTIONS, "re-added"}, world.done
    assert sum(len(w) for w in history.values()) > APPS * 5
    assert _flip_backs(history) == []
    assert _mixed_writes(history) == []
