"""What the garbage collector reads of applications: their metadata, nothing else.

Every application write reaches the collector, yet it only ever looks at
owners, finalizers and the deletion mark. Decoding whole Applications
(manifest, observer schema, scheduling explanation, container health...) was
nearly all of its CPU during a burst, for objects it almost never collects;
this view reads the metadata and skips the rest of each event unread.
Its finalizer writes are ``PATCH``es of ``metadata.finalizers`` alone, so the
view is never written back whole.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shoal.model.base import Kind, ResourceRef


class _Metadata(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    namespace: str | None = None
    finalizers: list[str] = Field(default_factory=list)
    deleted: datetime | None = None
    owners: list[ResourceRef] = Field(default_factory=list)
    resource_version: int | None = None


class ApplicationMeta(Kind):
    """An Application as the garbage collector sees it: owners, finalizers, deletion."""

    model_config = ConfigDict(extra="ignore")

    api: Literal["kubernetes"] = "kubernetes"
    kind: Literal["Application"] = "Application"
    metadata: _Metadata  # type: ignore[assignment]
