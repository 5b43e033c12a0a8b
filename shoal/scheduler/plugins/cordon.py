"""Cordoned clusters (``spec.unschedulable``) take no new applications.

As ``kubectl cordon`` does for nodes: applications already there stay through
routine passes (the current cluster is kept while stickiness applies); a
forced pass — a RescheduleTask, such as the one ``shoal kube cluster drain``
creates — moves them off. Clouds have no such flag and always pass.
"""

from __future__ import annotations

import numpy as np

from shoal.scheduler.backends import Backend, BoolArray
from shoal.scheduler.framework import Context, FilterPlugin, register

REASON = "cordoned"


def cordoned(backend: Backend) -> bool:
    spec = getattr(backend.obj, "spec", None)
    return bool(getattr(spec, "unschedulable", False))


@register("filters")
class Cordon(FilterPlugin):
    """Drop cordoned backends, except the current one of a routine (sticky) pass."""

    name = "cordon"

    def filter(self, ctx: Context) -> list[tuple[str, BoolArray]]:
        keep = ctx.group.mask("cordon", lambda b: not cordoned(b))
        if keep.all():
            return []
        if ctx.current is not None and ctx.request.sticky and not keep[ctx.current]:
            keep = keep.copy()
            keep[ctx.current] = True
        return [(REASON, np.asarray(keep, dtype=bool))]
