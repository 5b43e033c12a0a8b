"""How a long-running Shoal process sets up Python's memory management."""

from __future__ import annotations

import gc

_tuned = False  # this process is a Shoal server: tune_gc ran


def tune_gc() -> None:
    """Collect less often, as every Shoal server process does before it serves.

    Informer caches, stores and the simulator hold hundreds of thousands of small acyclic
    objects: with Python's default thresholds the young generation is collected every 700
    allocations, and full collections keep walking them all (two thirds of a task
    controller's time at 10,000 applications; a tenth of an API create's). What exists at
    start is frozen out of the collector's sight.

    The young generation's threshold counts allocations net of frees, and a cache
    that replaces an object on each event frees old objects as it makes young ones:
    the young generation fills far past the threshold between passes, and each pass
    walks it all. At 200,000 instead of 50,000, passes are fewer and most of the
    young objects they would have walked (an event's decoded JSON, an object's
    previous copy) are freed before: the kube controller's collections took 145–290
    ms of CPU per 2,000 applications instead of 315–350, the scheduler's 130–155
    instead of 215–265 (``bench/e2e.py``; docs/performance-rounds.md, fifth round).
    """
    global _tuned
    _tuned = True
    gc.freeze()
    gc.set_threshold(200_000, 20, 100)


def settle() -> None:
    """Freeze what exists now, after a cache was filled, in a server process (else nothing).

    A listing brings a cache's objects at once: 10,000 clusters are 600,000 objects
    that hold no cycles and live as long as the process. Left to the collector, each
    collection of the middle generation walked them again until they were promoted
    (0.3 to 0.5 s per pass in the scheduler, a third of its CPU in a burst after start).
    Frozen, they are never walked; they are still freed as usual when replaced. A test
    process does not tune the collector and freezes nothing: cyclic garbage that exists
    when freezing would never be reclaimed.
    """
    if _tuned:
        gc.freeze()
