"""One pod on its way through the pipeline, and what each phase found out about it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shoal.machinery.resources import Amounts, pod_requests
from shoal.machinery.types import Obj
from shoal.model.pods import Container, Pod

Key = tuple[str, str]  # namespace, name


def _resources(container: Container) -> Obj:
    return {"resources": {"requests": container.resources.requests,
                          "limits": container.resources.limits}}


@dataclass(slots=True)
class Candidate:
    cluster: str
    node: str
    score: float
    available: Amounts
    total: Amounts


@dataclass
class PodWork:
    pod: Pod
    requests: Amounts
    attempts: int = 0  # rounds that sampled enough agents to decide and commit
    rounds: int = 0  # every round, attempt or not: the back-off grows with them
    enqueued: float = field(default_factory=time.monotonic)
    timings: dict[str, float] = field(default_factory=dict)
    explanation: Obj = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    pinned: Candidate | None = None  # a commit whose outcome is unknown: only it is retried
    bound: Candidate | None = None
    verify: bool = False  # known before this scheduler started: an agent may already have it
    _body: tuple[Pod, Obj, Obj] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, pod: Pod) -> PodWork:
        spec = pod.spec  # the parts ``pod_requests`` reads, without dumping the model
        parts = {"containers": [_resources(c) for c in spec.containers],
                 "initContainers": [_resources(c) for c in spec.initContainers],
                 "overhead": spec.overhead}
        return cls(pod, pod_requests(parts))

    @property
    def key(self) -> Key:
        return (self.pod.metadata.namespace or "default", self.pod.metadata.name)

    def body(self) -> Obj:
        """The pod as the agents read it (and the member cluster gets it); made once per object
        (each round sends it again)."""
        if self._body is None or self._body[0] is not self.pod:
            meta = self.pod.metadata
            made = {"metadata": {"name": meta.name, "namespace": meta.namespace or "default",
                                 "uid": meta.uid or "", "labels": dict(meta.labels)},
                    "spec": self.pod.spec.kubernetes()}
            self._body = (self.pod, made, self._with_geo(made))
        return self._body[1]

    def sample_body(self) -> Obj:
        """As ``body``, with the geo target in the labels the agent's geo plugin reads."""
        self.body()
        assert self._body is not None
        return self._body[2]

    def _with_geo(self, body: Obj) -> Obj:
        geo = self.pod.spec.placement.geo
        if geo is None:
            return body
        labels = {**body["metadata"]["labels"],
                  "shoal.dev/target-lat-long": f"{geo.latitude}_{geo.longitude}",
                  "shoal.dev/max-distance-km": f"{geo.max_distance_km:g}"}
        return {**body, "metadata": {**body["metadata"], "labels": labels}}
