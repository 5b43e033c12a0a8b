"""Which applications are placed on each cluster, and which have copies running there.

The scheduler answers every cluster event from these indexes (O(1) per binding, not a
pass over every application): a changed cluster requeues the applications placed on it,
and a deleted one waits until no application is placed on it and no copy runs there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from shoal.model.kubernetes import AppKey, Application
from shoal.scheduler.watched import copy_clusters, key_of, placed_clusters

ClusterKey = tuple[str | None, str]


class ClusterIndex:
    """Applications by the clusters they are placed on and the clusters their copies run on,
    each with its reverse. ``emptied`` is told of a cluster its last application or copy
    left."""

    def __init__(self, emptied: Callable[[ClusterKey], None]) -> None:
        self.emptied = emptied
        self.on_cluster: dict[ClusterKey, set[AppKey]] = defaultdict(set)
        self.bound_to: dict[AppKey, set[ClusterKey]] = {}  # on_cluster, reversed
        # where an application's copies run (running_on, pending clean-ups): a deleted
        # cluster waits for them to go while it answers
        self.copies_on: dict[ClusterKey, set[AppKey]] = defaultdict(set)
        self.copies_of: dict[AppKey, set[ClusterKey]] = {}

    def update(self, app: Application, add: bool = True) -> None:
        """Index ``app`` as it is now (``add=False``: it is gone)."""
        key = key_of(app)
        targets = placed_clusters(app) if add else set()
        for before in self.bound_to.pop(key, set()) - targets:
            if (apps := self.on_cluster.get(before)) is not None:
                apps.discard(key)
                if not apps:
                    self.emptied(before)  # the last one left: a deleted cluster may go
        for where in targets:
            self.on_cluster[where].add(key)
        if targets:
            self.bound_to[key] = targets
        copies = copy_clusters(app) if add else set()
        if copies or key in self.copies_of:
            for gone in self.copies_of.pop(key, set()) - copies:
                holders = self.copies_on.get(gone)
                if holders is not None:
                    holders.discard(key)
                    if not holders:
                        del self.copies_on[gone]
                        self.emptied(gone)  # its last copy left
            for where in copies:
                self.copies_on[where].add(key)
            if copies:
                self.copies_of[key] = copies
