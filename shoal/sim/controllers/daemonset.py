"""DaemonSet → one pod per schedulable node that matches the template's ``nodeSelector``.

A node that only went NotReady keeps its daemon pod; pods of an older template,
on nodes no longer wanted, or finished are deleted.
"""

from __future__ import annotations

from shoal.machinery.types import Obj
from shoal.sim.controllers.base import Controllers
from shoal.sim.objects import DAEMONSETS, PODS, count_ready, pod_active, template_hash

KEY = DAEMONSETS


def reconcile(c: Controllers, ds: Obj) -> None:
    template = ds["spec"]["template"]
    h = template_hash(template)
    selector = (template.get("spec") or {}).get("nodeSelector") or {}
    wanted = {n for n, info in c.nodes.nodes.items()
              if info.schedulable and info.matches(selector)}
    have: dict[str, Obj] = {}
    for p in c.owned(ds, PODS):
        node = p["spec"].get("nodeName")
        fresh = p["metadata"].get("labels", {}).get("controller-revision-hash") == h
        # a node that is not wanted but still there (only NotReady) keeps its pod
        keep = fresh and pod_active(p) and (
            node not in have if node in wanted else node in c.nodes)
        if keep:
            have[str(node)] = p
        else:
            c.delete(PODS, p)
    for node in sorted(wanted - set(have)):
        have[node] = c.new_pod(ds, template, None, {"controller-revision-hash": h}, node)
    ready = count_ready(have.values())
    c.set_status(DAEMONSETS, ds, {
        "desiredNumberScheduled": len(wanted), "currentNumberScheduled": len(have),
        "updatedNumberScheduled": len(have), "numberReady": ready, "numberAvailable": ready,
        "numberMisscheduled": 0,
        **({"numberUnavailable": len(wanted) - ready} if len(wanted) > ready else {}),
    })
