"""Field-level status writes: a JSON merge patch applied to the stored object.

``PATCH {item}/status`` carries only the writer's own fields (RFC 7386 merge
patch) and, optionally, ``metadata.resource_version`` as a precondition. The
API applies it to the object as stored now, under the store's compare-and-swap
(re-read and re-applied on a concurrent write), so a writer never sends back,
and never undoes, fields it did not mean to touch. For applications, ``state``
and ``reason`` are then derived (``shoal.model.application_status``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from shoal.api.auth import clusters
from shoal.api.auth.authn import User
from shoal.api.auth.roles import ADMINS, COMPONENTS, component_user
from shoal.machinery.patch import merge_patch  # RFC 7386
from shoal.machinery.problems import ProblemError, invalid_error, validation_problem
from shoal.model import application_status
from shoal.model.base import TRUSTED, Finalizer, Kind
from shoal.model.copies import Copy
from shoal.model.kubernetes import Application, ApplicationStatus, Cluster, ClusterStatus

log = logging.getLogger(__name__)


def parse(body: Any) -> tuple[dict[str, Any], int | None]:
    """The status fields of a patch body, and its resource_version precondition."""
    if not isinstance(body, dict):
        raise _invalid("body", "must be a JSON object with 'status'")
    extra = sorted(set(body) - {"status", "metadata", "api", "kind"})
    if extra:
        raise _invalid(extra[0], "a status patch holds only status and metadata.resource_version")
    fields = body.get("status")
    if not isinstance(fields, dict):
        raise _invalid("status", "must be an object of the status fields to change")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or set(metadata) - {"resource_version", "name", "namespace"}:
        raise _invalid("metadata", "only metadata.resource_version may be given")
    expected = metadata.get("resource_version")
    if expected is not None and (not isinstance(expected, int) or isinstance(expected, bool)):
        raise _invalid("metadata.resource_version", "must be an integer")
    return fields, expected


_FINALIZERS: TypeAdapter[list[str]] = TypeAdapter(list[Finalizer])


def parse_finalizers(body: Any) -> tuple[list[str], int | None]:
    """The finalizers of a metadata patch body, and its resource_version precondition."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    if not isinstance(metadata, dict) or set(body) - {"metadata", "api", "kind"}:
        raise _invalid("body", "a metadata patch holds only metadata.finalizers")
    extra = sorted(set(metadata) - {"finalizers", "resource_version", "name", "namespace"})
    if extra or "finalizers" not in metadata:
        field = f"metadata.{extra[0]}" if extra else "metadata.finalizers"
        raise _invalid(field, "only metadata.finalizers (and resource_version) may be patched")
    try:
        finalizers = _FINALIZERS.validate_python(metadata["finalizers"])
    except ValidationError as error:
        raise _refused(error, "metadata", "finalizers") from None
    expected = metadata.get("resource_version")
    if expected is not None and (not isinstance(expected, int) or isinstance(expected, bool)):
        raise _invalid("metadata.resource_version", "must be an integer")
    return finalizers, expected


#: Members of this group write every component's status fields: controllers that run
#: under a name of their own, such as Krake's (docs/from-krake.md).
CONTROLLERS = "shoal:controllers"

#: The writer a user is when it is no component: it owns no status field.
TENANT = "tenant"

#: The writer a pull cluster's own identity is (``shoal.api.auth.clusters``).
CLUSTER_AGENT = "cluster-agent"

#: What a pull cluster's agent writes of its cluster's status: what the observer writes
#: of a push cluster's, and its lease (docs/pull-mode.md).
AGENT_FIELDS = frozenset(
    {"state", "reason", "nodes", "node_summary", "custom_resources", "heartbeat", "agent_version"}
)


def writer_of(user: User | None) -> str | None:
    """Whose status fields ``user`` writes: a component's, ``TENANT`` (none), None (any).

    Without security, anonymous (an API that lets anyone write), an administrator,
    the controllers' group and the other components write any field; the
    scheduler, kube controller and observer their own; every other user none.
    """
    if user is None or user.anonymous:
        return None
    if clusters.identity(user) is not None:
        return CLUSTER_AGENT
    component = application_status.WRITERS.get(user.name)
    if component is not None:
        return component
    if ADMINS in user.groups or CONTROLLERS in user.groups:
        return None
    if user.name in _COMPONENT_USERS:
        return None
    return TENANT


_COMPONENT_USERS = frozenset(component_user(name) for name in COMPONENTS)

#: A cluster's status is its components' (docs/status-ownership.md, "Clusters"):
#: its cloud and build steer the infrastructure controller, its state the scheduler.
_CLUSTER_FIELDS = frozenset(ClusterStatus.model_fields)


def check_writer(kind: type[Kind], user: User | None, fields: Iterable[str]) -> None:
    """A writer may write only its own status fields (403 names the field).

    A component patches only its fields of an application; a tenant no field
    any component owns, of an application or a cluster: those fields steer the
    controllers, which act with the credentials of the clusters they name.
    """
    fields = set(fields)
    if kind is Application:
        derived = sorted(application_status.OWNERS["derived"] & fields)
        if derived:
            raise _invalid(
                f"status.{derived[0]}",
                "is derived from the writers' fields (docs/status-ownership.md); not written",
            )
    writer = writer_of(user)
    if writer is None:
        return
    if writer == TENANT:
        owned = _CLUSTER_FIELDS if kind is Cluster else _APPLICATION_FIELDS
        if kind is Copy:  # a copy's status is its cluster's agent's alone
            owned = frozenset(fields)
        foreign = sorted(fields & owned) if kind in (Application, Cluster, Copy) else []
        whose = "of a Shoal component, not written by users"
    elif writer == CLUSTER_AGENT:
        if kind is Copy:
            foreign = []  # which copies: the guard's rule (those of its own cluster)
        else:
            foreign = sorted(fields - AGENT_FIELDS) if kind is Cluster else sorted(fields)
        whose = "not a field a cluster's agent writes"
    elif kind is Application:
        foreign = application_status.foreign_fields(writer, fields)
        whose = f"not a field of the {writer}"
    else:
        return
    if foreign:
        raise ProblemError(
            403,
            f"status.{foreign[0]}: {whose} (docs/status-ownership.md)",
            errors=[
                {"field": f"status.{name}", "reason": "owned by another writer"} for name in foreign
            ],
        )


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The status fields a whole-status write changes, from the stored and written dumps."""
    return sorted(k for k in {*before, *after} if before.get(k) != after.get(k))


_APPLICATION_FIELDS = frozenset().union(
    *(fields for owner, fields in application_status.OWNERS.items() if owner != "derived")
)


def patcher(kind: type[Kind], fields: dict[str, Any]) -> Callable[[dict[str, Any]], bool | None]:
    """The change for ``Resources.swap_json``: merge, validate, derive; False when unchanged.

    Only the fields the patch touches are read as a model, with what an
    application's ``state``, ``reason`` and placements derive from: the others
    were valid when they were stored. A cluster's patch of its conditions no
    longer reads its node list, nor an application's health patch its manifest.
    """
    model = status_model(kind)
    touched = set(fields)
    if kind is Application:
        touched |= _DERIVED_FROM

    def change(data: dict[str, Any]) -> bool | None:
        before = data.get("status") or {}
        merged = before
        if kind is Application:  # a stored state no field gives: fold it in first
            merged = _folded(before)
        merged = merge_patch(merged, fields)
        read = {key: merged[key] for key in touched if key in merged}
        status = validated(model, read)
        if isinstance(status, ApplicationStatus):
            application_status.apply(status)
        written = set(fields)
        if kind is Application:  # and what apply() wrote, where the stored status has it
            written |= {"state", "reason"} | (_DERIVED & merged.keys())
        new = {**merged, **status.model_dump(mode="json", include=written)}
        if new == before:
            return False
        data["status"] = new
        return True

    return change


def status_model(kind: type[Kind]) -> type[BaseModel]:
    """The model of ``kind``'s status; 404 when it has none."""
    field = kind.model_fields.get("status")
    factory = field.default_factory if field is not None else None
    if factory is None:
        raise ProblemError(404, f"{kind.kind_name()} has no status")
    return type(factory())  # type: ignore[call-arg]


def validated(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """``data`` read as ``model``; 422 naming each wrong field when invalid."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise _refused(error, "status") from None


def _refused(error: ValidationError, *where: str) -> ProblemError:
    """A 422 naming each wrong field, its path starting at ``where``."""
    return validation_problem(error, where)


def _folded(stored: dict[str, Any]) -> dict[str, Any]:
    """An application's stored status with a state no field gives folded into the fields.

    Only the fields of the derivation are read as a model (the whole status is
    validated once, after the patch).
    """
    status = _derivation(stored)
    before = (status.schedule_reason, status.deploy_state, status.deploy_reason)
    application_status.fold_explicit(status)
    if (status.schedule_reason, status.deploy_state, status.deploy_reason) == before:
        return stored
    return {**stored, **_dump(status, "schedule_reason", "deploy_state", "deploy_reason")}


def edit_application_json(data: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit an application's status held as stored JSON (binding path), then derive.

    A stored ``state``/``reason`` that its fields do not give (written by a Krake
    client, or before the fields existed) is first folded into the writers' fields.
    Only the fields of the derivation are read as a model: a binding stays cheap.
    """
    stored = _folded(data["status"])
    data["status"] = stored
    edit(stored)
    status = _derivation(stored)
    application_status.apply(status)
    stored.update(_dump(status, "state", "reason"))
    if stored.get("placements"):  # several clusters: each placement's copy, joined
        status = ApplicationStatus.model_validate(
            {"placements": stored["placements"], "copies": stored.get("copies") or []},
            context=TRUSTED,
        )
        application_status.join_copies(status)
        stored.update(_dump(status, "placements"))


# next_retry: a NO_SUITABLE_RESOURCE that will be retried is DEGRADED, not FAILED
_DERIVATION = (
    "state", "reason", "schedule_reason", "next_retry", "deploy_state", "deploy_reason"
)
_DERIVED = frozenset(("state", "reason", "placements"))  # what ``apply`` writes
_DERIVED_FROM = frozenset((*_DERIVATION, "placements", "copies"))  # what it reads


def _derivation(status: dict[str, Any]) -> ApplicationStatus:
    """The status with only what ``state`` and ``reason`` derive from."""
    fields = {k: status[k] for k in _DERIVATION if status.get(k) is not None}
    return ApplicationStatus.model_validate(fields, context=TRUSTED)


def _dump(status: ApplicationStatus, *fields: str) -> dict[str, Any]:
    dumped: dict[str, Any] = status.model_dump(mode="json", include=set(fields))
    return dumped


def _invalid(field: str, reason: str) -> ProblemError:
    return invalid_error([{"field": field, "reason": reason}])
