"""SIGKILL the etcd leader during 1,000 creates: acknowledged creates survive, the API serves on."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from shoal.client.rest import ApiError, Unreachable
from shoal.model.kubernetes import Application
from shoal.testing.builders import app
from shoal.testing.launch import ApiProcess
from tests.fixtures.etcd import EtcdCluster, EtcdServer
from tests.util import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(120)]

CREATES = 1000
IN_FLIGHT = 32
KILL_AFTER = 200  # acknowledged creates before the kill
REQUEST_TIMEOUT = 15.0  # a write stalled by the election must not hang the test


def _status(member: EtcdServer) -> dict[str, str]:
    """``Maintenance.Status`` through etcd's JSON gateway: member id and leader id."""
    request = urllib.request.Request(
        f"{member.client_url}/v3/maintenance/status", data=b"{}", method="POST"
    )
    with urllib.request.urlopen(request, timeout=2) as response:
        data = json.loads(response.read())
    return {"member": str(data["header"]["member_id"]), "leader": str(data["leader"])}


def leader_of(cluster: EtcdCluster) -> EtcdServer:
    statuses = [_status(m) for m in cluster.members]
    leader = statuses[0]["leader"]
    return next(m for m, s in zip(cluster.members, statuses, strict=True) if s["member"] == leader)


def application(name: str, namespace: str) -> Application:
    return app(name, namespace=namespace)


async def test_leader_killed_during_creates(etcd_cluster: EtcdCluster, tmp_path: Path) -> None:
    # Worst case on both counts: the killed member leads the raft group and is
    # also the endpoint the API talks to first, so the API must fail over.
    leader = await asyncio.to_thread(leader_of, etcd_cluster)
    others = [m for m in etcd_cluster.members if m is not leader]
    store = "etcd://" + ",".join(m.endpoint for m in [leader, *others])
    api = ApiProcess(store, log=tmp_path / "api.log")
    ns = f"kill-{uuid.uuid4().hex[:8]}"
    try:
        await api.wait_ready()
        async with api.client(timeout=REQUEST_TIMEOUT) as client:
            acknowledged: list[str] = []
            failed: dict[str, str] = {}
            sem = asyncio.Semaphore(IN_FLIGHT)
            killed = asyncio.Event()

            async def create(i: int) -> None:
                name = f"app-{i:05d}"
                async with sem:
                    try:
                        await client.create(application(name, ns))
                    except (ApiError, Unreachable, TimeoutError) as error:
                        failed[name] = f"{type(error).__name__}: {error}"
                        return
                acknowledged.append(name)
                if len(acknowledged) == KILL_AFTER and not killed.is_set():
                    killed.set()
                    leader.kill()

            started = time.monotonic()
            await asyncio.wait_for(asyncio.gather(*(create(i) for i in range(CREATES))), 90)
            burst = time.monotonic() - started
            assert killed.is_set()
            assert not leader.running()
            # Most writes go through: only those caught in the election may fail.
            assert len(acknowledged) >= CREATES * 0.8, (len(acknowledged), list(failed.items())[:5])

            # Every acknowledged create is readable afterwards.
            listing = await client.list(Application, ns)
            stored = {a.metadata.name for a in listing.items}
            missing = set(acknowledged) - stored
            assert not missing, sorted(missing)[:10]
            # A failed create was not acknowledged; it may or may not have been applied.
            assert stored <= set(acknowledged) | set(failed)

            # And the API keeps serving on the two members left.
            async def serving() -> bool:
                try:
                    await client.create(application(f"probe-{uuid.uuid4().hex[:6]}", ns))
                except (ApiError, Unreachable, TimeoutError):
                    return False
                return True

            await wait_for(serving, timeout=20, interval=0.2, message="creates after the kill")
            after = [application(f"after-{i:03d}", ns) for i in range(50)]
            await asyncio.gather(*(client.create(a) for a in after))
            again = await client.list(Application, ns)
            assert {a.metadata.name for a in after} <= {a.metadata.name for a in again.items}
            print(
                f"\n{len(acknowledged)} acknowledged, {len(failed)} failed "
                f"of {CREATES} in {burst:.1f}s with the leader killed after {KILL_AFTER}"
            )
    finally:
        api.stop()
