"""The cost of one event, on each side of ``POST /core/events``, in CPU microseconds.

A fresh API (SQLite WAL file in a temp dir) receives ``--batches`` batches of
1,000 events as the scheduler's recorder builds them (one ``Scheduled`` per
application): first as new events, then the same events again (repeats, whose
counts are bumped). The API's CPU comes from /proc, so the figures hold on a
busy machine better than a throughput does; the recorder's side (emit, the
request's JSON, the answer) is timed in this process.

    .venv/bin/python bench/events.py [--batches 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench.schedule import cpu_seconds  # noqa: E402
from shoal.client.rest import ShoalClient  # noqa: E402
from shoal.events.recorder import MAX_BATCH, PATH, Recorder  # noqa: E402
from shoal.model.base import Metadata  # noqa: E402
from shoal.model.kubernetes import Application, ApplicationSpec  # noqa: E402
from shoal.testing.builders import manifest  # noqa: E402
from shoal.testing.launch import ApiProcess  # noqa: E402


def applications(batch: int) -> list[Application]:
    spec = ApplicationSpec(manifest=manifest("web"))
    return [
        Application(
            metadata=Metadata(name=f"a{batch}-{i:04d}", namespace="default", uid=f"{batch}-{i}"),
            spec=spec,
        )
        for i in range(MAX_BATCH)
    ]


async def run(batches: int) -> None:
    recorder = Recorder(None, "scheduler")
    recorder.enabled = True  # emit into the buffer; this bench sends the batches itself
    recorder._ensure_task = lambda: None  # type: ignore[method-assign]
    apps = [applications(b) for b in range(batches)]
    bodies: list[bytes] = []
    start = time.process_time()
    for b, batch in enumerate(apps):
        for i, app in enumerate(batch):
            score = (b * MAX_BATCH + i) % 997 / 997
            recorder.emit(app, "Scheduled", f"Scheduled to c{i % 100:04d} (score {score:.3f})")
        items = [recorder._item(p) for p in recorder._take()]
        bodies.append(orjson.dumps({"events": items}))
    build = time.process_time() - start
    n = batches * MAX_BATCH
    with tempfile.TemporaryDirectory() as tmp:
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(f"sqlite://{Path(tmp) / 'shoal.db'}", secured=False)
        try:
            await api.wait_ready()
            async with ShoalClient(api.url) as client:
                await client.request("GET", "/readyz")
                rows = []
                for phase in ("new", "repeat"):
                    cpu0, mine0 = cpu_seconds(api.proc.pid), time.process_time()
                    for body in bodies:
                        async with client.session.post(
                            client.url + PATH,
                            data=body,
                            headers={"content-type": "application/json"},
                        ) as response:
                            answer = orjson.loads(await response.read())
                        assert all(r["status"] == 200 for r in answer["results"]), answer
                    api_cpu = cpu_seconds(api.proc.pid) - cpu0
                    rows.append((phase, api_cpu, time.process_time() - mine0))
        finally:
            api.stop()
    print(f"{n} events in batches of {MAX_BATCH}; CPU microseconds per event")
    print(f"recorder: emit and build the request {1e6 * build / n:.1f}")
    for phase, api_cpu, mine in rows:
        print(f"{phase:>8}: API {1e6 * api_cpu / n:6.1f}   client (send, read the answer) "
              f"{1e6 * mine / n:5.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    asyncio.run(run(parser.parse_args().batches))


if __name__ == "__main__":
    main()
