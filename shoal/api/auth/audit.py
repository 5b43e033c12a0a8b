"""The audit log: one JSON line per write, in the spirit of Kubernetes' audit events."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from shoal.api.auth.authn import User
from shoal.api.auth.target import Target


class Audit:
    """Writes to a file (appended, a line at a time) or to stdout (``"-"``)."""

    def __init__(self, where: str) -> None:
        self._own = where != "-"
        self._out: IO[bytes] = open(where, "ab", buffering=0) if self._own else sys.stdout.buffer

    def write(
        self,
        user: User | None,
        method: str,
        path: str,
        target: Target | None,
        code: int,
        items: list[str] | None = None,
        impersonator: User | None = None,
    ) -> None:
        """One line; ``items``: the ``namespace/name`` of each item of a batch;
        ``impersonator``: who sent a request acting for ``user`` (``Impersonate-User``)."""
        event: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "user": user.name if user else None,
            "groups": list(user.groups) if user else [],
            "verb": target.verb if target else method.lower(),
            "api": target.api if target else None,
            "resource": target.resource if target else None,
            "namespace": target.namespace if target else None,
            "name": target.name if target else None,
            "uri": path,
            "code": code,
        }
        if items is not None:
            event["items"] = items
        if impersonator is not None:
            event["impersonated_by"] = impersonator.name
        self._out.write(orjson.dumps(event) + b"\n")

    def close(self) -> None:
        if self._own:
            self._out.close()
