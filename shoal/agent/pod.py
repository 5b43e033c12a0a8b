"""Request bodies of the agent's API, and a pod as the plugins see it.

A body is validated once (a 422 names the failing field); what every plugin
needs per node (requests, selector, tolerations) is computed once per request,
not once per node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, WrapValidator

from shoal.machinery.names import kube_name
from shoal.machinery.resources import Amounts, pod_requests
from shoal.machinery.types import Obj
from shoal.model.pods import KubernetesPodSpec, Toleration

UID_ANNOTATION = "shoal.dev/pod-uid"


class _Open(BaseModel):
    """Kubernetes objects carry many fields the agent passes through untouched."""

    model_config = ConfigDict(extra="allow")


class PodMeta(_Open):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


SPECS_KEPT = 4096  # distinct pod specs remembered (replicas and batches repeat a few)
_specs: dict[bytes, KubernetesPodSpec] = {}
_requests: dict[int, tuple[KubernetesPodSpec, Amounts]] = {}
_dumped: dict[int, tuple[KubernetesPodSpec, Obj]] = {}


def _known_spec(value: Any, handler: ValidatorFunctionWrapHandler) -> KubernetesPodSpec:
    """A spec validated before is not validated again: the scheduler sends the same few specs
    in every batch (validating containers and quantities was most of a sample's cost). The
    model is shared, so nothing may change it."""
    try:
        key = orjson.dumps(value) if isinstance(value, dict) else None
    except TypeError:  # not JSON (a Python caller's odd value): validated as it is
        key = None
    if key is None:
        spec: KubernetesPodSpec = handler(value)
        return spec
    found = _specs.get(key)
    if found is None:
        found = handler(value)
        if len(_specs) >= SPECS_KEPT:
            _specs.clear()
        _specs[key] = found
    return found


def _spec_requests(spec: KubernetesPodSpec) -> Amounts:
    """What a pod of ``spec`` takes from its node, worked out once per (shared) spec."""
    known = _requests.get(id(spec))
    if known is None or known[0] is not spec:
        parts = spec.model_dump(include={"containers", "initContainers", "overhead"})
        if len(_requests) >= SPECS_KEPT:
            _requests.clear()
        known = _requests[id(spec)] = (spec, pod_requests(parts))
    return dict(known[1])


def _spec_json(spec: KubernetesPodSpec) -> Obj:
    """The spec as the member cluster gets it, dumped once per (shared) spec; read only."""
    known = _dumped.get(id(spec))
    if known is None or known[0] is not spec:
        if len(_dumped) >= SPECS_KEPT:
            _dumped.clear()
        known = _dumped[id(spec)] = (spec, spec.model_dump(mode="json", exclude_unset=True))
    return known[1]


class Pod(_Open):
    metadata: PodMeta = Field(default_factory=PodMeta)
    spec: Annotated[KubernetesPodSpec, WrapValidator(_known_spec)]


class SampleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pod: Pod
    nodesToSampleBp: int | None = Field(default=None, ge=1, le=10_000)
    keep: int | None = Field(
        default=None, ge=1, description="Answer only the best KEEP of the Np nodes (by score)")


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[SampleBody] = Field(min_length=1, max_length=1000)


class CommitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pod: Pod
    nodeName: str = Field(min_length=1)


class CommitBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[CommitBody] = Field(min_length=1, max_length=1000)


class UidsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uids: list[str] = Field(min_length=1, max_length=10_000)


@dataclass(slots=True)
class PodRequest:
    """A pod to place, with what the plugins read precomputed."""

    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    requests: Amounts
    node_selector: dict[str, str]
    tolerations: list[Toleration]
    pod: Pod = field(repr=False)

    @classmethod
    def of(cls, pod: Pod, default_namespace: str) -> PodRequest:
        """The member cluster's pod for ``pod``: a Shoal name that is no Kubernetes name
        (``system:admin``, ``web_1``) is mapped to one (``names.kube_name``)."""
        return cls(
            name=kube_name(pod.metadata.name, 253, dots=True),
            namespace=kube_name(pod.metadata.namespace or default_namespace),
            uid=pod.metadata.uid,
            labels=pod.metadata.labels,
            requests=_spec_requests(pod.spec),
            node_selector=pod.spec.nodeSelector,
            tolerations=pod.spec.tolerations,
            pod=pod,
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def manifest(self, node: str) -> Obj:
        """The pod to create in the member cluster: bound to ``node`` at create, tagged by uid.

        Binding at create (``spec.nodeName``) is one write: no pod can be left
        created but unbound, and the uid annotation makes a repeated commit
        find the pod it already made.
        """
        meta: Obj = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            meta["labels"] = dict(self.labels)
        meta["annotations"] = {**self.pod.metadata.annotations, UID_ANNOTATION: self.uid}
        spec = {**_spec_json(self.pod.spec), "nodeName": node}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
