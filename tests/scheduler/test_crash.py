"""SIGKILL the scheduler in the middle of a burst: every application ends bound exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from tests.scheduler.helpers import NS, app, cluster
from tests.util import free_port, wait_for

LAUNCH = str(Path(__file__).with_name("launch.py"))
ROOT = str(Path(__file__).resolve().parents[2])
APPS = 2000


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, LAUNCH, *args], env=env, cwd=ROOT)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def api_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc = _spawn("api", str(tmp_path / "shoal.db"), str(port))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture
async def api_client(api_url: str) -> AsyncIterator[ShoalClient]:
    async def healthy() -> bool:
        try:
            async with httpx.AsyncClient() as http:
                return (await http.get(api_url + "/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    await wait_for(healthy, timeout=20, interval=0.1, message="API up")
    async with ShoalClient(api_url) as c:
        yield c


async def _bound_count(client: ShoalClient) -> int:
    apps = (await client.list(Application, NS)).items
    return sum(1 for a in apps if a.status.scheduled_to is not None)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_scheduler_killed_mid_burst(api_url: str, api_client: ShoalClient) -> None:
    client = api_client
    for i in range(3):
        await client.create(cluster(f"c{i}"))
    first = _spawn("scheduler", api_url)
    second: subprocess.Popen[bytes] | None = None
    try:
        sem = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with sem:
                await client.create(app(f"app-{i:05d}"))

        burst = asyncio.ensure_future(asyncio.gather(*(create(i) for i in range(APPS))))

        # Kill the scheduler once it is busy binding, while applications are still coming.
        await wait_for(lambda: _bound_count(client), timeout=60, interval=0.05, message="binds")
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert not burst.done(), "burst over before the kill: make it bigger"
        second = _spawn("scheduler", api_url)
        await burst

        async def all_bound() -> bool:
            return await _bound_count(client) == APPS

        await wait_for(all_bound, timeout=120, interval=0.5, message="all bound")
        await asyncio.sleep(1.0)  # room for a (wrong) second binding to show

        listing = await client.list(Application, NS)
        assert len(listing.items) == APPS
        assert all(a.status.scheduled_to is not None for a in listing.items)

        # Binding events in the history: MODIFIED with scheduled_to going from None to set.
        bindings: Counter[str] = Counter()
        current: dict[str, str | None] = {}

        async def replay() -> None:
            async for event in client.watch(Application, NS, resource_version=0):
                name = event.object.metadata.name
                target = event.object.status.scheduled_to
                now = target.name if target else None
                if event.type == "MODIFIED" and current.get(name) is None and now is not None:
                    bindings[name] += 1
                current[name] = now
                if event.revision >= listing.revision:
                    return

        await asyncio.wait_for(replay(), 60)
        assert len(current) == APPS
        assert set(bindings) == set(current)
        assert all(n == 1 for n in bindings.values()), {k: n for k, n in bindings.items() if n != 1}
        # Nor was anything moved afterwards: where it was bound is where it is.
        assert all(a.status.scheduled_to.name == current[a.metadata.name] for a in listing.items)  # type: ignore[union-attr]
    finally:
        _stop(first)
        if second is not None:
            _stop(second)
