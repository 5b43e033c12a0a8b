"""Run the API or the scheduler as a process of its own (crash test, bench/schedule.py).

python tests/scheduler/launch.py api SQLITE_PATH PORT
python tests/scheduler/launch.py scheduler API_URL [CONFIG_JSON]
"""

from __future__ import annotations

import json
import sys

import uvloop


async def _api(path: str, port: int) -> None:
    from shoal.api.server import start_api

    server = await start_api(f"sqlite:///{path}", "127.0.0.1", port)
    try:
        await server.task
    finally:
        await server.stop()


async def _scheduler(url: str, config: str | None) -> None:
    from shoal.client.rest import ShoalClient
    from shoal.scheduler.config import SchedulerConfig
    from shoal.scheduler.scheduler import Scheduler

    cfg = SchedulerConfig.model_validate(json.loads(config)) if config else SchedulerConfig()
    async with ShoalClient(url) as client:
        await Scheduler(client, cfg).run()


def main() -> None:
    mode = sys.argv[1]
    if mode == "api":
        uvloop.run(_api(sys.argv[2], int(sys.argv[3])))
    elif mode == "scheduler":
        uvloop.run(_scheduler(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
