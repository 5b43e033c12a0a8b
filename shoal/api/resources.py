"""What the API does to stored objects: the rules behind every route.

Create, update, status, binding and delete of any kind, with server-set
metadata, compare-and-swap on ``resource_version`` and two-phase deletion
(``metadata.deleted`` first, removal when the last finalizer is gone).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from shoal.api import status as status_patch
from shoal.api.admission import admit, dry
from shoal.api.auth.authn import User
from shoal.api.auth.store import SecuredStore, kept_path
from shoal.api.batch import each_item
from shoal.api.bindings import binding_refs, bound, check_cloud_ref, check_ref
from shoal.api.codec import decode, encode, with_revision
from shoal.api.destinations import admit_destinations
from shoal.api.field_selector import parse_field_selector
from shoal.api.listing import (
    continue_key,
    make_continue,
    namespace_of,
    parse_continue,
    parse_label_selector,
    refuse_secret_fields,
)
from shoal.machinery.problems import ProblemError
from shoal.model import application_status, krake
from shoal.model.base import Kind, utcnow
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import EVICTION_FINALIZER, Application, ApplicationStatus, Cluster
from shoal.model.shape import prune
from shoal.model.subresources import ApplicationBinding, BindingBatch, BindingItem, ClusterBinding
from shoal.store.base import AlreadyExists, Conflict, NotFound, Record, Store

K = TypeVar("K", bound=Kind)

NO_UPDATE = "The body contained no update."
"""A PUT of a Krake kind whose body is the stored object is a 400, as Krake answers it (Shoal's
own kinds answer such a PUT with the object, as Kubernetes does)."""
KRAKE_KINDS = frozenset(krake.FIELDS)

_SERVER_OWNED = ("uid", "created", "modified", "deleted", "resource_version")
_CAS_ATTEMPTS = 20


def _spec_fields(kind: type[Kind]) -> list[str]:
    return [f for f in kind.model_fields if f not in ("api", "kind", "metadata", "status")]


class Resources:
    """Operations on the objects of one store, shared by every route."""

    def __init__(
        self,
        store: Store,
        *,
        finalizers_at_create: Mapping[type[Kind], tuple[str, ...]] | None = None,
    ) -> None:
        self.store = store
        # Finalizers every new object of a kind gets, as Kubernetes' admission gives a PVC
        # its protection: the controller that removes one then needs no write to add it.
        self.finalizers_at_create = dict(finalizers_at_create or {})

    # reads -------------------------------------------------------------------

    async def get_bytes(self, kind: type[Kind], name: str, namespace: str | None) -> bytes:
        record = await self._get_record(kind, name, namespace)
        return with_revision(record.value, record.revision)

    async def get(self, kind: type[K], name: str, namespace: str | None) -> K:
        record = await self._get_record(kind, name, namespace)
        return decode(kind, record.value, record.revision)

    async def _get_record(self, kind: type[Kind], name: str, namespace: str | None) -> Any:
        try:
            return await self.store.get(kind.key(name, namespace))
        except NotFound:
            where = f" in namespace {namespace!r}" if kind.namespaced else ""
            raise ProblemError(404, f"{kind.kind_name()} {name!r} not found{where}") from None

    async def list_bytes(
        self,
        kind: type[Kind],
        namespace: str | None,
        label_selector: str | None,
        limit: int | None,
        cont: str | None,
        field_selector: str | None = None,
        visible: Callable[[str | None], bool] | None = None,
    ) -> tuple[list[bytes], int, str | None]:
        """A page of objects; ``visible``: the namespaces the reader may see, applied before
        selectors and paging, so neither items, page tokens nor matches tell of others."""
        selector = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        refuse_secret_fields(kind, fields)
        prefix = kind.key_prefix(namespace)
        start_after, revision_hint = parse_continue(cont, prefix)
        items: list[bytes] = []
        revision = 0
        next_token: str | None = None
        after = start_after
        while True:
            narrowed = selector is not None or fields is not None
            scale = 4 if narrowed or visible is not None else 1
            batch = None if limit is None else max(limit - len(items), 1) * scale
            records, revision = await self.store.list(prefix, start_after=after, limit=batch)
            for record in records:
                if visible is not None and not visible(namespace_of(record.key)):
                    continue
                if narrowed:
                    data = orjson.loads(record.value)
                    labels = data["metadata"].get("labels") or {}
                    if selector is not None and not selector.matches(labels):
                        continue
                    if fields is not None and not fields.matches(data):
                        continue
                items.append(with_revision(record.value, record.revision))
                if limit is not None and len(items) >= limit:
                    next_token = make_continue(record.key, revision_hint or revision)
                    break
            if next_token or batch is None or len(records) < batch:
                break
            after = records[-1].key
        if next_token is not None:
            more, _ = await self.store.list(prefix, start_after=continue_key(next_token), limit=1)
            if not more:
                next_token = None
        return items, revision, next_token

    # writes ------------------------------------------------------------------

    async def create(self, kind: type[K], body: K, namespace: str | None) -> bytes:
        return (await self.create_at(kind, body, namespace))[0]

    async def create_at(
        self, kind: type[K], body: K, namespace: str | None
    ) -> tuple[bytes, int | None]:
        """The created object's wire bytes and its revision (None in a dry run)."""
        if kind.namespaced:
            if body.metadata.namespace not in (None, namespace):
                raise ProblemError(
                    422,
                    f"metadata.namespace: {body.metadata.namespace!r} does not match the "
                    f"namespace {namespace!r} of the URL",
                    errors=[{"field": "metadata.namespace", "reason": "does not match the URL"}],
                )
            body.metadata.namespace = namespace
        else:
            body.metadata.namespace = None
        await admit(body)  # after the namespace is known: references are checked against it
        await admit_destinations(self.store, body)
        now = utcnow()
        meta = body.metadata
        meta.uid = str(uuid.uuid4())
        meta.created = now
        meta.modified = now
        meta.deleted = None
        added = self.finalizers_at_create.get(kind)
        if added:
            meta.finalizers = [*meta.finalizers, *(f for f in added if f not in meta.finalizers)]
        if "status" in kind.model_fields:
            object.__setattr__(body, "status", body.initial_status())
        value = encode(body)
        if dry():
            await self._refuse_existing(kind, body)
            return value, None
        revision = await self.store.create(body.store_key(), value)
        return with_revision(value, revision), revision

    async def update(self, kind: type[K], body: K, name: str, namespace: str | None) -> bytes:
        _check_identity(body, name, namespace)
        await admit(body)
        await admit_destinations(self.store, body)
        kept = kept_path(kind.key(name, namespace))

        def change(current: K) -> bool:
            """``modified`` moves when the spec or labels change, not on bookkeeping.

            The scheduler and the kube controller compare it with
            ``kube_controller_triggered``: a controller adding its finalizer (or
            the API an owner) is no new spec for them to act on.
            """
            changed = modified = False
            if kept is not None:  # the API wrote it at creation; the answer shows that value
                _carry_field(current, body, kept)
            for field in _spec_fields(kind):
                new = getattr(body, field)
                if getattr(current, field) != new:
                    object.__setattr__(current, field, new)
                    changed = modified = True
            for field in ("labels", "inherit_labels", "finalizers", "owners"):
                new = getattr(body.metadata, field)
                if getattr(current.metadata, field) != new:
                    setattr(current.metadata, field, new)
                    changed = True
                    modified = modified or field in ("labels", "inherit_labels")
            if modified:
                current.metadata.modified = utcnow()
            if not changed and kind.kind_name() in KRAKE_KINDS and _same_object(body, current):
                raise ProblemError(400, NO_UPDATE, title="UPDATE_ERROR")
            return changed

        return await self._modify(kind, name, namespace, body.metadata.resource_version, change)

    async def _refuse_existing(self, kind: type[Kind], body: Kind) -> None:
        """A dry-run create answers 409 where the create would."""
        try:
            await self.store.get(body.store_key())
        except NotFound:
            return
        raise AlreadyExists(body.store_key())

    async def update_status(
        self, kind: type[K], body: K, name: str, namespace: str | None, user: User | None = None
    ) -> bytes:
        """Krake's whole-status write; the fields it changes are checked as a patch's are."""
        _check_identity(body, name, namespace)
        status = getattr(body, "status", None)
        if isinstance(status, ApplicationStatus):
            application_status.fold_explicit(status)
            application_status.apply(status)

        def change(current: K) -> bool:
            stored = getattr(current, "status", None)
            if stored == status:
                return False
            if isinstance(stored, BaseModel) and isinstance(status, BaseModel):
                changed = status_patch.changed_fields(
                    stored.model_dump(mode="json"), status.model_dump(mode="json")
                )
                derived = application_status.OWNERS["derived"] if kind is Application else ()
                status_patch.check_writer(kind, user, [f for f in changed if f not in derived])
            object.__setattr__(current, "status", status)
            return True

        return await self._modify(kind, name, namespace, body.metadata.resource_version, change)

    async def patch_status(
        self,
        kind: type[Kind],
        name: str,
        namespace: str | None,
        body: Any,
        user: User | None = None,
    ) -> bytes:
        """Merge the writer's own status fields into the stored object (compare-and-swap)."""
        fields, expected = status_patch.parse(body)
        status_patch.check_writer(kind, user, fields)
        change = status_patch.patcher(kind, fields)
        return await self.swap_json(kind, name, namespace, expected, change)

    async def patch_finalizers(
        self, kind: type[Kind], name: str, namespace: str | None, body: Any
    ) -> bytes:
        """Set ``metadata.finalizers`` alone: a controller's bookkeeping, cheap on the JSON.

        ``modified`` stays (no new spec); a deleted object whose last finalizer
        goes is removed, as on a full update.
        """
        finalizers, expected = status_patch.parse_finalizers(body)

        def rewrite(record: Record) -> tuple[bytes, bool] | None:
            data = orjson.loads(record.value)
            metadata = data["metadata"]
            if (metadata.get("finalizers") or []) == finalizers:
                return None
            metadata["finalizers"] = finalizers
            return orjson.dumps(data), metadata.get("deleted") is not None and not finalizers

        return await self._swap(kind, name, namespace, expected, rewrite)

    async def bind_application(
        self, name: str, namespace: str | None, binding: ApplicationBinding
    ) -> bytes:
        """Bind an application to a cluster: the scheduler's commit, on its hot path.

        Works on the stored JSON as a dict (only the status is validated, to derive
        state and reason): a binding touches a few status fields, one write per application.
        """
        cluster, placements = binding_refs(binding, namespace)

        def bind(data: dict[str, Any]) -> None:
            if data["metadata"].get("deleted") is not None:
                raise ProblemError(409, f"Application {name!r} is being deleted")
            status_patch.edit_application_json(
                data, lambda status: bound(data, status, binding, cluster, placements)
            )

        return await self.swap_json(Application, name, namespace, binding.resource_version, bind)

    async def bind_many(self, batch: BindingBatch) -> list[dict[str, Any]]:
        """Several bindings in one request, each its own compare-and-swap, one commit."""

        async def bind(item: BindingItem) -> bytes:
            return await self.bind_application(item.name, item.namespace, item)

        return await each_item(self.store, batch.bindings, bind)

    async def bind_cluster(
        self, name: str, namespace: str | None, binding: ClusterBinding
    ) -> bytes:
        cloud = binding.cloud
        check_cloud_ref(cloud, namespace)
        kinds: dict[str, type[Kind]] = {"Cloud": Cloud, "GlobalCloud": GlobalCloud}
        try:
            await self.store.get(kinds[cloud.kind].key(cloud.name, cloud.namespace))
        except NotFound:
            check_ref("cloud.name", False, f"an existing {cloud.kind}")

        def change(cluster: Cluster) -> bool:
            now = utcnow()
            if cluster.status.scheduled_to != binding.cloud or cluster.status.scheduled is None:
                cluster.status.scheduled = now
            cluster.status.scheduled_to = binding.cloud
            cluster.status.kube_controller_triggered = now
            return True

        return await self._modify(
            Cluster, name, namespace, binding.resource_version, change, allow_deleted=False
        )

    async def delete(
        self, kind: type[K], name: str, namespace: str | None, force: bool = False
    ) -> bytes:
        """Mark deleted; removed when no finalizer is left.

        A cluster with applications bound to it gets the eviction finalizer: the
        scheduler moves them first, then lets it go (docs/scheduler.md). ``force``:
        without it, so the cluster goes at once.
        """
        evict = kind is Cluster and not force and await self._holds_applications(name, namespace)

        def change(current: K) -> bool:
            finalizers = current.metadata.finalizers
            if force and EVICTION_FINALIZER in finalizers:
                current.metadata.finalizers = [f for f in finalizers if f != EVICTION_FINALIZER]
            elif current.metadata.deleted is not None:
                return False
            elif evict and EVICTION_FINALIZER not in finalizers:
                current.metadata.finalizers = [*finalizers, EVICTION_FINALIZER]
            if current.metadata.deleted is None:
                current.metadata.deleted = utcnow()
            return True

        return await self._modify(kind, name, namespace, None, change)

    async def _holds_applications(self, cluster: str, namespace: str | None) -> bool:
        """Whether an application of the namespace is scheduled to this cluster.

        A pass over the namespace's applications, made only when a cluster is
        deleted; the bytes are searched before any is parsed.
        """
        records, _ = await self.store.list(Application.key_prefix(namespace))
        name = orjson.dumps(cluster)
        for record in records:
            if b'"scheduled_to":{' not in record.value or name not in record.value:
                continue
            status = orjson.loads(record.value)["status"] or {}
            targets = [status.get("scheduled_to") or {}]
            targets += [p.get("cluster") or {} for p in status.get("placements") or ()]
            for target in targets:
                if target.get("kind") == "Cluster" and target.get("name") == cluster:
                    if target.get("namespace") in (namespace, None):
                        return True
        return False

    async def set_application_state(
        self,
        name: str,
        namespace: str | None,
        change: Callable[[Application], bool],
    ) -> bytes:
        return await self._modify(Application, name, namespace, None, change)

    async def _modify(
        self,
        kind: type[K],
        name: str,
        namespace: str | None,
        expected: int | None,
        change: Callable[[K], bool],
        allow_deleted: bool = True,
    ) -> bytes:
        """Read the object as its model, change it, compare-and-swap."""

        def rewrite(record: Record) -> tuple[bytes, bool] | None:
            current = decode(kind, record.value, record.revision)
            if not allow_deleted and current.metadata.deleted is not None:
                raise ProblemError(409, f"{kind.kind_name()} {name!r} is being deleted")
            if not change(current):
                return None
            gone = current.metadata.deleted is not None and not current.metadata.finalizers
            return encode(current), gone

        return await self._swap(kind, name, namespace, expected, rewrite)

    async def swap_json(
        self,
        kind: type[Kind],
        name: str,
        namespace: str | None,
        expected: int | None,
        change: Callable[[dict[str, Any]], bool | None],
    ) -> bytes:
        """Change the stored JSON as a dict (cheap for small status edits), compare-and-swap.

        ``change`` returns False when it changed nothing (no write), anything else to write.
        What it set to a Shoal addition's default is left out, as the model's writes do.
        """

        def rewrite(record: Record) -> tuple[bytes, bool] | None:
            data = orjson.loads(record.value)
            if change(data) is False:
                return None
            return orjson.dumps(prune(kind, data)), False

        return await self._swap(kind, name, namespace, expected, rewrite)

    async def _swap(
        self,
        kind: type[Kind],
        name: str,
        namespace: str | None,
        expected: int | None,
        rewrite: Callable[[Record], tuple[bytes, bool] | None],
    ) -> bytes:
        """Read, rewrite, compare-and-swap; with no expected revision, retry on conflict.

        ``rewrite`` returns None (nothing to write) or the new value and whether the
        object is to be removed (deleted, and its last finalizer gone).
        """
        key = kind.key(name, namespace)
        for _ in range(_CAS_ATTEMPTS):
            record = await self._get_record(kind, name, namespace)
            if expected is not None and record.revision != expected:
                raise Conflict(key, expected, record.revision)
            new = rewrite(record)
            if new is None:
                return with_revision(record.value, record.revision)
            value, remove = new
            if dry():
                if isinstance(self.store, SecuredStore):  # the write's own checks, no write
                    await self.store.check_update(key, value)
                return with_revision(value, record.revision)
            try:
                if remove:
                    revision = await self.store.delete(key, record.revision)
                else:
                    revision = await self.store.update(key, value, record.revision)
            except Conflict:
                if expected is not None:
                    raise
                continue
            except NotFound:
                raise ProblemError(404, f"{kind.kind_name()} {name!r} not found") from None
            return with_revision(value, revision)
        raise ProblemError(409, f"{kind.kind_name()} {name!r} is changing too fast; try again")


def _same_object(body: Kind, current: Kind) -> bool:
    """Krake's test of an update that brings nothing: the body is the stored object, status
    and server-set metadata included (the revision aside: Krake's objects have none). Made
    only when the update would change nothing."""
    exclude: Any = {"metadata": {"resource_version"}}
    return body.model_dump(exclude=exclude) == current.model_dump(exclude=exclude)


def _carry_field(source: Kind, target: Kind, path: tuple[str, ...]) -> None:
    """Set the field at ``path`` of ``target`` to ``source``'s."""
    here: Any = source
    there: Any = target
    for part in path[:-1]:
        here, there = getattr(here, part), getattr(there, part)
    setattr(there, path[-1], getattr(here, path[-1]))


def _check_identity(body: Kind, name: str, namespace: str | None) -> None:
    if body.metadata.name != name:
        raise ProblemError(
            422,
            f"metadata.name: {body.metadata.name!r} does not match {name!r} of the URL",
            errors=[{"field": "metadata.name", "reason": "does not match the URL"}],
        )
    if namespace is not None and body.metadata.namespace not in (None, namespace):
        raise ProblemError(
            422,
            f"metadata.namespace: {body.metadata.namespace!r} does not match the URL",
            errors=[{"field": "metadata.namespace", "reason": "does not match the URL"}],
        )


