"""How a long-running Shoal process sets up Python's memory management."""

from __future__ import annotations

import gc


def tune_gc() -> None:
    """Collect less often, as every Shoal server process does before it serves.

    Informer caches, stores and the simulator hold hundreds of thousands of small acyclic
    objects: with Python's default thresholds the young generation is collected every 700
    allocations, and full collections keep walking them all (two thirds of a task
    controller's time at 10,000 applications; a tenth of an API create's). What exists at
    start is frozen out of the collector's sight.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
