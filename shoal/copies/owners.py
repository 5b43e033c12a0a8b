"""Which application owns an object in a member cluster, and whether another may touch it.

Every object Shoal applies carries labels and annotations naming its
application (namespace, name, uid), so that two applications naming the same
object never fight over it: the second is refused with reason ``CONFLICT``
unless its ``spec.conflict_resolution`` is ``overwrite``. The decision is made
here from the live object alone; the controller does the I/O.

A Shoal name need not be a label value (``system:admin``): the labels carry
``kube_label_value``'s form of it, and the annotation the exact names, which
decide. Two namespaces whose label forms could be taken for each other
(``system:admin`` and ``system-admin``) are told apart by the annotation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shoal.machinery.names import kube_label_value
from shoal.machinery.types import Obj
from shoal.model.kubernetes import Application

PREFIX = "shoal.dev/"
LABEL_NAMESPACE = PREFIX + "app-namespace"
LABEL_NAME = PREFIX + "app-name"
LABEL_UID = PREFIX + "app-uid"
ANNOTATION_APP = PREFIX + "application"  # "namespace/name"
ANNOTATION_UID = PREFIX + "application-uid"


@dataclass(frozen=True, slots=True)
class Owner:
    """An application, as an object's labels name it."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"application {self.namespace}/{self.name} (uid {self.uid})"

    @classmethod
    def of(cls, app: Application) -> Owner:
        return cls(app.metadata.namespace or "default", app.metadata.name, app.metadata.uid or "")

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL_NAMESPACE: kube_label_value(self.namespace),
            LABEL_NAME: kube_label_value(self.name),
            LABEL_UID: self.uid,
        }

    @property
    def annotations(self) -> dict[str, str]:
        return {ANNOTATION_APP: f"{self.namespace}/{self.name}", ANNOTATION_UID: self.uid}

    @property
    def selector(self) -> str:
        """A label selector of the objects this application owns."""
        return f"{LABEL_UID}={self.uid}"


def owner_of(live: Obj | None) -> Owner | None:
    """The application that owns ``live``: its uid from the labels (the annotation when labels
    were cut), its exact namespace and name from the annotation (the labels when it was cut:
    a name that is no label value then reads as its label form, which names no application)."""
    if live is None:
        return None
    meta = live.get("metadata") or {}
    labels = meta.get("labels") or {}
    notes = meta.get("annotations") or {}
    uid = labels.get(LABEL_UID) or notes.get(ANNOTATION_UID)
    if not uid:
        return None
    namespace, _, name = str(notes.get(ANNOTATION_APP) or "/").partition("/")
    return Owner(
        namespace or str(labels.get(LABEL_NAMESPACE) or ""),
        name or str(labels.get(LABEL_NAME) or ""),
        str(uid),
    )


def owned(obj: Obj, owner: Owner) -> Obj:
    """A copy of manifest object ``obj`` that names ``owner`` (its own labels kept).

    Labels and annotations of Shoal's own (``shoal.dev/``) that the manifest
    carries are dropped: only the controller says who owns an object.
    """
    meta = dict(obj.get("metadata") or {})
    meta["labels"] = {**_not_shoals(meta.get("labels")), **owner.labels}
    meta["annotations"] = {**_not_shoals(meta.get("annotations")), **owner.annotations}
    return {**obj, "metadata": meta}


def _not_shoals(values: object) -> dict[str, object]:
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if not str(k).startswith(PREFIX)}


def describe(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    where = f" in namespace {meta['namespace']}" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {meta.get('name')}{where}"


def refusal(
    obj: Obj,
    live: Obj | None,
    me: Owner,
    *,
    recorded: bool = False,
    overwrite: bool,
    exists: Callable[[Owner], bool],
) -> str | None:
    """Why ``me`` may not apply ``obj`` over ``live``; None when it may.

    ``recorded``: the application's own status, as its controller wrote it, says
    it applied this object on that cluster (imported from Krake, whose objects
    carry no owner): an object without an owner there is labelled as its own.
    Only a component writes that status (docs/status-ownership.md), and only a
    cluster of the application's namespace is acted on. Deleting never relies on
    it (``mine``).
    ``exists`` tells whether an owning application still exists in Shoal: an
    object left by a deleted application of the same namespace and name
    (recreated) is taken back. An object whose owner is of another namespace is
    never taken, ``overwrite`` or not: two tenants whose credentials reach one
    member cluster put their objects without a namespace into the same
    Kubernetes namespace (their contexts'), and neither may take the other's.
    Nothing is said of that namespace, nor whether its application exists.
    """
    if live is None:
        return None
    owner = owner_of(live)
    if owner is not None and owner.uid == me.uid:
        return None
    if owner is not None and owner.namespace != me.namespace:
        return f"{describe(obj)} belongs to an application of another namespace: never taken over"
    if owner is not None and not exists(owner):
        if owner.name == me.name:
            return None  # left by an earlier application of this name
        owner = None  # its application is gone: as good as without an owner
    if overwrite:
        return None
    if owner is not None:
        return f"{describe(obj)} is owned by {owner}"
    if recorded:
        return None
    return (
        f"{describe(obj)} exists without an owner (spec.conflict_resolution: overwrite adopts it)"
    )


def mine(live: Obj | None, me: Owner) -> bool:
    """Whether ``me`` may delete ``live``: it carries ``me``'s owner label (or annotation,
    where labels were cut). An object without an owner is never an application's."""
    owner = owner_of(live)
    return owner is not None and owner.uid == me.uid


def former_owner(live: Obj | None, me: Owner, exists: Callable[[Owner], bool]) -> Owner | None:
    """The application of ``me``'s namespace that owned ``live`` and still exists, if any."""
    owner = owner_of(live)
    if owner is None or owner.uid == me.uid or owner.namespace != me.namespace:
        return None
    return owner if exists(owner) else None
