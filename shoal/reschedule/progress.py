"""The running state of one RescheduleTask in its controller: targets, results, counts."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shoal.model.kubernetes import AppKey
from shoal.model.scheduling import TargetResult, TargetStatus


@dataclass(eq=False)
class Progress:
    """One running task as the controller sees it: stored targets with results found since.

    Each pass judges only the targets whose application changed (``dirty``) and
    keeps the counts as it goes; results live here until a write carries them.
    Passes over every target on each event, and every target written each
    second, cost more than the placements of a 10,000-target task.
    """

    uid: str
    targets: list[TargetStatus]
    index: dict[AppKey, int]  # target → its position in ``targets``
    pending: set[AppKey]
    successful: int
    failed: int
    dirty: set[AppKey] = field(default_factory=set)  # targets whose application changed
    next_full: float = 0.0  # monotonic time of the next pass over every pending target
    # monotonic time of the last progress write: the first counts wait for a quarter of the
    # targets (or _QUIET), not for the first result, while the API is busiest with the stamps
    counted: float = field(default_factory=time.monotonic)
    stored: float = field(default_factory=time.monotonic)  # ... of the last with every target
    written: int = 0  # resource_version of the last write (the informer may be behind)

    @classmethod
    def of(cls, uid: str, stored: list[TargetStatus]) -> Progress:
        targets = list(stored)
        index = {(t.namespace, t.name): i for i, t in enumerate(targets)}
        return cls(
            uid,
            targets,
            index,
            {key for key, i in index.items() if targets[i].result is None},
            sum(t.result is TargetResult.Successful for t in targets),
            sum(t.result is TargetResult.Failed for t in targets),
        )

    def settle(self, key: AppKey, target: TargetStatus) -> None:
        self.pending.discard(key)
        if target.result is TargetResult.Successful:
            self.successful += 1
        else:
            self.failed += 1

    def counts(self) -> dict[str, int]:
        return {
            "total": len(self.targets),
            "successful": self.successful,
            "failed": self.failed,
            "pending": len(self.pending),
        }
