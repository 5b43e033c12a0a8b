"""Pod lifecycle (the kubelet's part): bound pods start, run, and some finish.

A pod bound to a node becomes Running (Ready as its node) ``pod_start_delay``
seconds later, with a pod IP and container statuses. Job pods, or pods annotated
``sim.shoal.dev/run-seconds``, then succeed after ``job_duration`` / N seconds.
Running pods follow their node's Ready condition.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.machinery.types import Obj
from shoal.machinery.workqueue import WorkQueue
from shoal.sim.nodes import NodeSet
from shoal.sim.objects import NODES, PODS, condition, condition_true, controller_of
from shoal.sim.store import Store, now

RUN_SECONDS = "sim.shoal.dev/run-seconds"


@dataclass
class Kubelet:
    """The kubelets of all nodes of one cluster."""

    store: Store
    nodes: NodeSet
    queue: WorkQueue[tuple[str, ...]]
    node_ready: Callable[[str], bool]
    pod_start_delay: float = 0.5
    job_duration: float = 1.0
    _ips: int = field(default=0, init=False)

    def pod_bound(self, pod: Obj) -> None:
        """A pod is bound to a node: start it unless it already started."""
        if pod["status"].get("phase") == "Pending" and not pod["status"].get("startTime"):
            meta = pod["metadata"]
            self.queue.add_after(("start", meta.get("namespace", ""), meta["name"], meta["uid"]),
                                 self.pod_start_delay)

    def _current(self, ns: str, name: str, uid: str, phase: str) -> Obj | None:
        pod = self.store.get(PODS, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") != phase:
            return None
        return pod

    def start(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid, "Pending")
        if pod is None or not pod["spec"].get("nodeName"):
            return
        node = pod["spec"]["nodeName"]
        ts = now()
        self._ips += 1
        pod_ip = f"10.244.{(self._ips >> 8) & 255}.{self._ips & 255}"
        host_ip = ""
        for a in (self.store.get(NODES, "", node) or {}).get("status", {}).get("addresses") or ():
            if a.get("type") == "InternalIP":
                host_ip = a["address"]
        ready = "True" if self.node_ready(node) else "False"

        def run(new: Obj) -> None:
            new["status"].update(
                phase="Running",
                startTime=ts,
                podIP=pod_ip,
                podIPs=[{"ip": pod_ip}],
                hostIP=host_ip,
                hostIPs=[{"ip": host_ip}] if host_ip else [],
                conditions=[
                    condition("PodReadyToStartContainers", "True"),
                    condition("Initialized", "True"),
                    condition("Ready", ready),
                    condition("ContainersReady", ready),
                    condition("PodScheduled", "True"),
                ],
                containerStatuses=[
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": f"sim://{c.get('image', '')}",
                        "containerID": f"sim://{secrets.token_hex(8)}",
                        "ready": ready == "True",
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": ts}},
                    }
                    for c in new["spec"].get("containers") or ()
                ],
            )

        running = self.store.modify(PODS, pod, run)
        duration = self.run_duration(running)
        if duration is not None:
            self.queue.add_after(("finish", ns, name, uid), duration)

    def run_duration(self, pod: Obj) -> float | None:
        """How long a pod runs before it succeeds; None for pods that run until deleted."""
        ann = pod["metadata"].get("annotations") or {}
        if RUN_SECONDS in ann:
            try:
                return float(ann[RUN_SECONDS])
            except ValueError:
                return None
        ctl = controller_of(pod)
        if ctl and ctl.get("kind") == "Job":
            return self.job_duration
        return None

    def finish(self, ns: str, name: str, uid: str) -> None:
        pod = self._current(ns, name, uid, "Running")
        if pod is None:
            return
        ts = now()

        def succeed(new: Obj) -> None:
            new["status"]["phase"] = "Succeeded"
            for c in new["status"].get("conditions") or ():
                if c["type"] in ("Ready", "ContainersReady"):
                    c.update(status="False", reason="PodCompleted", lastTransitionTime=ts)
            for cs in new["status"].get("containerStatuses") or ():
                started = cs.get("state", {}).get("running", {}).get("startedAt", ts)
                cs.update(ready=False, started=False, state={"terminated": {
                    "exitCode": 0, "reason": "Completed", "startedAt": started,
                    "finishedAt": ts}})

        self.store.modify(PODS, pod, succeed)

    def sync_readiness(self, node: str) -> None:
        """Running pods of ``node`` turn Ready/NotReady with the node."""
        info = self.nodes.get(node)
        if info is None:
            return
        ready = condition_true(self.store.get(NODES, "", node) or {}, "Ready", default=True)
        want = "True" if ready else "False"

        def follow(new: Obj) -> None:
            for c in new["status"].get("conditions") or ():
                if c["type"] in ("Ready", "ContainersReady"):
                    c.update(status=want, lastTransitionTime=now())
            for cs in new["status"].get("containerStatuses") or ():
                cs["ready"] = ready

        for ns, name in list(info.pod_keys):
            pod = self.store.get(PODS, ns, name)
            if pod is None or pod["status"].get("phase") != "Running":
                continue
            if any(c["type"] == "Ready" and c["status"] == want
                   for c in pod["status"].get("conditions") or ()):
                continue
            self.store.modify(PODS, pod, follow)

