"""The scheduler's metric cache: CPU of one refresh, which holds the scheduler's event loop.

One static provider holds N values and N GlobalMetrics read them (as a fleet where every
cluster has metrics of its own: bench/schedule.py's 10,000 clusters have 30,000). Printed
per N: the CPU of the first refresh (every metric new), of a refresh where nothing moved
(the steady state, every ``metrics_refresh`` seconds), and of one after a metric's
definition changed. Medians of ``--repeat`` refreshes each.

    .venv/bin/python bench/metric_cache.py [--metrics 1000,10000,30000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shoal.scheduler.metrics.cache import MetricCache
from shoal.testing.builders import metric, provider


async def timed(refresh: object) -> float:
    start = time.thread_time()
    await refresh()  # type: ignore[operator]
    return (time.thread_time() - start) * 1000


async def run(n: int, repeat: int) -> tuple[float, float, float]:
    rng = random.Random(n)
    values = {f"m{i}": rng.random() for i in range(n)}
    first, still, edited = [], [], []
    for _ in range(repeat):
        async with MetricCache() as cache:
            cache.set_provider(provider("static", values))
            for i in range(n):
                cache.set_metric(metric(f"m{i}"))
            first.append(await timed(cache.refresh_now))
            still.append(await timed(cache.refresh_now))
            cache.set_metric(metric("m0", hi=2.0))
            edited.append(await timed(cache.refresh_now))
    return statistics.median(first), statistics.median(still), statistics.median(edited)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", default="1000,10000,30000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("| metrics | first refresh | nothing moved | a definition changed |")
    print("| ---: | ---: | ---: | ---: |")
    for n in (int(x) for x in args.metrics.split(",")):
        first, still, edited = asyncio.run(run(n, args.repeat))
        print(f"| {n:,} | {first:.1f} ms | {still:.1f} ms | {edited:.1f} ms |")


if __name__ == "__main__":
    main()
