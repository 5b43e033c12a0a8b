"""What a placement handler (applications, clouds) works with, and what one pass answers.

Both handlers share this base; the scheduler requeues each key by the ``Outcome``.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.client.rest import ShoalClient
from shoal.model.scheduler_config import SchedulerConfig
from shoal.scheduler.backends import Backends
from shoal.scheduler.framework import Framework


@dataclass
class Outcome:
    """What a pass did, for the caller to requeue the key."""

    kind: str  # "bound", "kept", "pinned", "waiting", "failed", "skipped", "deferred"
    retry_in: float | None = None
    short: bool = False  # placed on fewer clusters than asked: a cluster event may help


@dataclass(eq=False)
class Handler:
    """What a placement handler works with: the API, the config, its backends and the framework."""

    client: ShoalClient
    config: SchedulerConfig
    backends: Backends
    framework: Framework

    def __post_init__(self) -> None:
        """Subclasses set up their own state here."""
