"""SIGKILL the kube controller in the middle of a burst: nothing doubled, nothing orphaned.

``shoal api``, ``shoal scheduler``, ``shoal kube-controller`` and ``shoal sim``
run as processes of their own. Applications (one-replica Deployments) are
created in a burst; once a twentieth of them run, the kube controller is
killed, a tenth of the applications are deleted while it is down, and a new
one is started.
Afterwards every remaining application is RUNNING on exactly one cluster, the
one it is bound to, with exactly one Deployment there, owned by it; no cluster
keeps a Deployment of a deleted application.

CI runs 400 applications on 4 clusters; ``SHOAL_KUBE_KILL_APPS=2000
SHOAL_KUBE_KILL_CLUSTERS=20`` runs the full burst.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import ShoalClient
from shoal.copies.owners import owner_of
from shoal.model.base import Metadata
from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterSpec
from shoal.testing.builders import app, register
from shoal.testing.launch import ApiProcess, controller, free_port, kill, spawn_shoal, stop
from tests.kube.conftest import NS, deployment
from tests.util import wait_for

APPS = int(os.environ.get("SHOAL_KUBE_KILL_APPS", "400"))
CLUSTERS = int(os.environ.get("SHOAL_KUBE_KILL_CLUSTERS", "4"))

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def kubeconfigs(tmp_path: Path) -> AsyncIterator[dict[str, dict[str, Any]]]:
    out = tmp_path / "kubeconfigs"
    sim = spawn_shoal(
        "sim", "--clusters", str(CLUSTERS), "--nodes", "5", "--port", str(free_port()),
        "--out", str(out), log=tmp_path / "sim.log",
    )  # fmt: skip
    try:
        paths = [out / f"sim-{i}.yaml" for i in range(CLUSTERS)]
        await wait_for(lambda: all(p.exists() for p in paths), timeout=30, message="sim")
        yield {p.stem: yaml.safe_load(p.read_text()) for p in paths}
    finally:
        stop(sim)


def application(i: int) -> Application:
    name = f"app-{i:05d}"
    return app(name, namespace=NS, manifest=[deployment(name, replicas=1)])


async def running(client: ShoalClient) -> list[Application]:
    items = (await client.list(Application, NS)).items
    return [a for a in items if a.status.state is ApplicationState.RUNNING]


async def deployments(kube: KubeCluster) -> list[dict[str, Any]]:
    listed = await kube.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments")
    return list(listed.get("items") or [])


@pytest.mark.timeout(300)
async def test_kube_controller_killed_mid_burst(
    api_process: ApiProcess, kubeconfigs: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    await api_process.wait_ready(timeout=30)
    procs = []
    clients = KubeClients(timeout=10)
    async with api_process.client(max_connections=24) as client:
        try:
            clusters = []
            for name, config in kubeconfigs.items():
                cluster = Cluster(
                    metadata=Metadata(name=name, namespace=NS), spec=ClusterSpec(kubeconfig=config)
                )
                clusters.append(await register(client, cluster))
            procs.append(controller("scheduler", api_process.url, log=tmp_path / "sched.log"))
            first = controller("kube-controller", api_process.url, log=tmp_path / "kc1.log")
            procs.append(first)

            # the controller is up (a warm-up application runs) before the burst starts
            await client.create(application(APPS))
            await wait_for(lambda: running(client), timeout=60, interval=0.2, message="warm-up")
            since = (await client.list(Application, NS)).revision
            sem = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                async with sem:
                    await client.create(application(i))

            burst = asyncio.ensure_future(asyncio.gather(*(create(i) for i in range(APPS))))

            async def deploying() -> int:
                # From the watch, not a listing: a listing of the burst takes long enough
                # on a fast machine for most of the burst to run meanwhile.
                seen: set[str] = set()
                async for event in client.watch(Application, NS, resource_version=since):
                    if event.object.status.state is ApplicationState.RUNNING:
                        seen.add(event.object.metadata.name)
                        if len(seen) > APPS // 20:
                            break
                return len(seen)

            # Kill it once it is deploying the burst, well before the end.
            count = await asyncio.wait_for(deploying(), timeout=120)
            kill(first)
            assert count < APPS // 2, f"{count} of {APPS} already RUNNING: make it bigger"
            await burst
            deleted = {f"app-{i:05d}" for i in range(0, APPS, 10)}
            for name in sorted(deleted):
                await client.delete(Application, name, NS)
            procs.append(controller("kube-controller", api_process.url, log=tmp_path / "kc2.log"))

            async def settled() -> list[Application] | None:
                items = (await client.list(Application, NS)).items
                done = len(items) == APPS + 1 - len(deleted) and all(
                    a.status.state is ApplicationState.RUNNING for a in items
                )
                return items if done else None

            apps = await wait_for(settled, timeout=240, interval=0.5, message="all RUNNING")

            # Exactly one cluster each, the one it is bound to; one Deployment, its own.
            uids = {a.metadata.name: a.metadata.uid for a in apps}
            for app in apps:
                assert app.status.running_on is not None
                assert app.status.running_on == app.status.scheduled_to, app.metadata.name
            on: Counter[tuple[str, str]] = Counter()
            for cluster in clusters:
                kube = await clients.get(cluster)
                for live in await deployments(kube):
                    name = live["metadata"]["name"]
                    assert name not in deleted, f"orphan {name} on {cluster.metadata.name}"
                    owner = owner_of(live)
                    assert owner is not None and owner.uid == uids.get(name), name
                    on[(name, cluster.metadata.name)] += 1
            where = {a.metadata.name: a.status.running_on.name for a in apps}  # type: ignore[union-attr]
            assert set(on) == set(where.items())
            assert all(count == 1 for count in on.values())
        finally:
            await clients.close()
            for proc in reversed(procs):
                stop(proc)
