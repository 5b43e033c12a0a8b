"""Types every layer names the same way."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
"""A JSON object as decoded: a stored object, a manifest, a Kubernetes resource."""
