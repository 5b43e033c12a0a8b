"""One tenant flooding the API with requests it may make is held to its rate; another tenant
is served throughout, at a latency close to what it sees alone.

The server runs with a rate of RATE requests a second (burst BURST), a tenth of what a
loaded machine serves to one flooding client (bob got 281 a second on a 2-core machine at load
average 10), so the flood always exceeds it: with a higher rate, a slow machine might never
reach it and the test would prove nothing. Alice keeps to half the rate, so that a refusal of
hers could only come from bob's flood."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.security.conftest import application, binding, tenant_role, token_file
from tests.util import free_port

SERVE = """
import asyncio, sys
from pathlib import Path
from shoal.api.auth import Security
from shoal.api.auth.config import Limits
from shoal.api.server import start_api

async def main():
    limits = Limits(rate_per_user=float(sys.argv[3]), burst=int(sys.argv[4]))
    security = Security(allow_anonymous=False, token_file=Path(sys.argv[2]), authorization="RBAC",
                        limits=limits)
    await start_api("sqlite://:memory:", port=int(sys.argv[1]), security=security)
    await asyncio.Event().wait()

asyncio.run(main())
"""

FLOOD = """
import asyncio, json, sys, time
import aiohttp

async def main():
    url, seconds = sys.argv[1], float(sys.argv[2])
    counts = {}
    headers = {"authorization": "Bearer bob-token"}
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(url, headers=headers,
                                     connector=aiohttp.TCPConnector(limit=64)) as http:
        async def worker():
            while time.monotonic() < deadline:
                async with http.get("/kubernetes/namespaces/b/applications/bob-app") as r:
                    await r.read()
                    counts[r.status] = counts.get(r.status, 0) + 1
        await asyncio.gather(*(worker() for _ in range(64)))
    print(json.dumps(counts))

asyncio.run(main())
"""

FLOOD_SECONDS = 4.0
RATE, BURST = 25, 25
#: Seconds between alice's requests: half the rate, so her own bucket never runs dry.
ALICE_EVERY = 2 / RATE


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000


@pytest.mark.slow
async def test_a_flooding_tenant_does_not_starve_another(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    tokens = str(token_file(tmp_path / "tokens.csv"))
    server = await asyncio.create_subprocess_exec(sys.executable, "-c", SERVE, str(port), tokens,
                                                  str(RATE), str(BURST), env=env)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        admin_headers = {"authorization": "Bearer admin-token"}
        async with aiohttp.ClientSession(url, headers=admin_headers) as admin:
            for _ in range(400):
                try:
                    async with admin.get("/healthz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.05)
            for namespace, user in (("a", "alice"), ("b", "bob")):
                async with admin.post("/core/roles", json=tenant_role(namespace)) as r:
                    assert r.status == 200
                body = binding(f"tenant-{namespace}", [user], [f"tenant-{namespace}"])
                async with admin.post("/core/rolebindings", json=body) as r:
                    assert r.status == 200
                path = f"/kubernetes/namespaces/{namespace}/applications"
                async with admin.post(path, json=application(f"{user}-app", namespace)) as r:
                    assert r.status == 200

        alice_headers = {"authorization": "Bearer alice-token"}
        async with aiohttp.ClientSession(url, headers=alice_headers) as alice:

            async def measure(seconds: float) -> tuple[list[float], list[int]]:
                latencies, statuses = [], []
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    start = time.perf_counter()
                    async with alice.get("/kubernetes/namespaces/a/applications/alice-app") as r:
                        await r.read()
                        statuses.append(r.status)
                    latencies.append(time.perf_counter() - start)
                    await asyncio.sleep(max(0.0, ALICE_EVERY - latencies[-1]))
                return latencies, statuses

            for _ in range(100):  # the role index has the bindings once alice is served
                async with alice.get("/kubernetes/namespaces/a/applications/alice-app") as r:
                    if r.status == 200:
                        break
                await asyncio.sleep(ALICE_EVERY)
            alone, _ = await measure(1.5)
            flood = await asyncio.create_subprocess_exec(
                sys.executable, "-c", FLOOD, url, str(FLOOD_SECONDS),
                env=env, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            await asyncio.sleep(0.5)  # the flood is under way
            during, statuses = await measure(FLOOD_SECONDS - 1.5)
            out, _ = await flood.communicate()
        counts = {int(k): v for k, v in orjson.loads(out).items()}
        p99_alone, p99_during = _p99(alone), _p99(during)
        print(
            f"\nflood by bob: {counts} in {FLOOD_SECONDS:g} s; alice p99 alone "
            f"{p99_alone:.1f} ms, during the flood {p99_during:.1f} ms ({len(during)} requests)"
        )
        assert set(statuses) == {200}  # alice is never refused
        assert counts.get(429, 0) > 0  # bob is held to his rate
        assert counts.get(200, 0) <= 1.2 * (BURST + RATE * FLOOD_SECONDS)  # burst + rate
        assert p99_during < max(20 * p99_alone, 250.0)
    finally:
        server.terminate()
        await server.wait()
