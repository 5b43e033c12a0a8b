"""What deploying, removing and writing need of the kube controller (``Hub``).

The controller (``kube.controller``) holds the caches, the work queue and the clients;
``kube.deploy``, ``kube.removal`` and ``kube.writes`` act through this shape of it, so
that none of them imports the controller.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import aiohttp

from shoal.client.batcher import Batcher
from shoal.client.informer import CacheKey, Informer
from shoal.client.rest import ShoalClient
from shoal.copies.applier import Applier
from shoal.copies.owners import Owner
from shoal.copies.watch import ClusterWatches
from shoal.events import Recorder
from shoal.kube.pulled import PulledCopies
from shoal.machinery.types import Obj
from shoal.machinery.workqueue import WorkQueue
from shoal.model.base import ReasonCode, ResourceRef
from shoal.model.copies import CopySpec
from shoal.model.kubernetes import Application, Cluster

Runner = Applier | PulledCopies
"""What runs a cluster's copies: its applier (push), or its ``Copy`` objects (pull)."""


class Hub(Protocol):
    """The kube controller, as the modules that act for it see it."""

    client: ShoalClient
    events: Recorder
    queue: WorkQueue[CacheKey]
    failures: dict[CacheKey, int]
    watches: ClusterWatches | None
    app_informer: Informer[Application]
    applied_at: dict[CacheKey, float]  # loop time of each application's last apply
    poll_interval: float
    fallback: float
    resync: float
    progress_delay: float
    cleanup_retry: float
    # copies left behind by deleted applications on clusters that did not answer then
    orphans: dict[CacheKey, list[tuple[str, Obj, Owner]]]
    orphan_tasks: dict[CacheKey, asyncio.Task[None]]
    cleanup_tried: dict[tuple[CacheKey, CacheKey], float]  # (app, cluster): loop time
    status_writes: Batcher
    finalizer_writes: Batcher
    written: dict[CacheKey, int]  # resource_version of our last write
    early: dict[CacheKey, list[int]]  # writes not yet answered: the events meanwhile

    def cluster(self, ref: ResourceRef | None) -> Cluster | None: ...

    def desired(self, app: Application) -> list[Obj]: ...

    def plan(self, app: Application) -> list[CopySpec]: ...

    async def applier(self, ref: ResourceRef, code: ReasonCode) -> Runner: ...

    async def applier_of(self, cluster: Cluster) -> Applier: ...

    async def runner_of(self, cluster: Cluster) -> Runner: ...

    async def write(self, app: Application, fields: dict[str, Any]) -> Application: ...

    async def set_finalizers(self, app: Application, finalizers: list[str]) -> Application: ...

    def http(self) -> aiohttp.ClientSession: ...
