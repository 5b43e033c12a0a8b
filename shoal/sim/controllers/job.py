"""Job → up to ``parallelism`` running pods until ``completions`` pods succeeded."""

from __future__ import annotations

from shoal.machinery.types import Obj
from shoal.sim.controllers.base import Controllers
from shoal.sim.objects import JOBS, PODS, condition, count_ready, pod_active
from shoal.sim.store import now

KEY = JOBS

_DONE = "Reached expected number of succeeded pods"


def reconcile(c: Controllers, job: Obj) -> None:
    spec = job["spec"]
    old = job.get("status") or {}
    completions = int(spec.get("completions") or 1)
    parallelism = int(spec.get("parallelism", 1))
    pods = c.owned(job, PODS)
    phases = [p["status"].get("phase") for p in pods]
    succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
    active = [p for p in pods if pod_active(p)]
    complete = succeeded >= completions
    if not complete and not spec.get("suspend"):
        want = min(parallelism, completions - succeeded)
        active += [c.new_pod(job, spec["template"]) for _ in range(want - len(active))]
    status: Obj = {"startTime": old.get("startTime") or now(), "active": len(active),
                   "succeeded": succeeded, "failed": failed, "ready": count_ready(active),
                   "terminating": 0}
    if complete and not old.get("completionTime"):
        status["completionTime"] = now()
        status["conditions"] = [
            condition("SuccessCriteriaMet", "True", "CompletionsReached", _DONE),
            condition("Complete", "True", "CompletionsReached", _DONE),
        ]
        status["active"] = 0
    c.set_status(JOBS, job, status, observed=False)
