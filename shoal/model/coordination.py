"""Leases in group ``core``: the record behind leader election of controllers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field

from shoal.model.base import Kind, Model


class LeaseSpec(Model):
    holder: str | None = Field(default=None, description="Identity of the leader; None: free.")
    renew_time: datetime | None = None
    acquire_time: datetime | None = None
    duration: float = Field(
        default=15.0, gt=0, description="Seconds after renew_time at which the lease expires."
    )
    transitions: int = Field(default=0, ge=0, description="How often the holder changed.")

    def expired(self, now: datetime) -> bool:
        """Free or not renewed for a whole duration (by the caller's clock)."""
        if self.holder is None or self.renew_time is None:
            return True
        return self.renew_time + timedelta(seconds=self.duration) < now


class Lease(Kind):
    api: Literal["core"] = "core"
    kind: Literal["Lease"] = "Lease"
    spec: LeaseSpec = Field(default_factory=LeaseSpec)

