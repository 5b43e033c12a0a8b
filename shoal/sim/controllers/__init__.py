"""The simulated controllers, one module per kind they reconcile.

Each workload module has ``KEY`` (the storage key of its kind) and
``reconcile(controllers, obj)``, which brings one object's dependents
and status in line with its spec; it is called whenever the object or one of its
pods changes.
"""

from __future__ import annotations

from collections.abc import Callable

from shoal.machinery.types import Obj
from shoal.sim.controllers import daemonset, deployment, job, replicaset, statefulset
from shoal.sim.controllers.base import Controllers

Reconcile = Callable[[Controllers, Obj], None]

RECONCILERS: dict[str, Reconcile] = {
    m.KEY: m.reconcile for m in (deployment, replicaset, statefulset, daemonset, job)
}

__all__ = ["RECONCILERS", "Controllers", "Reconcile"]
