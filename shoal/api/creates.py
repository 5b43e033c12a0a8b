"""Creates in batches: ``POST /kubernetes/applications``, ``POST /scheduling/pods``.

Clients that create in bulk (``shoal create -f`` of a file of many
applications, a CI system, a load generator) send ``{"items": [...]}`` to the
collection of every namespace; each item names its own namespace in
``metadata.namespace``. The creates share one request and one store commit,
where single creates each pay a request (about 300 µs of the API's CPU) and a
turn of the commit. Each item is checked as a single create is: its model,
admission, and RBAC in its namespace (by the guard, per item). One item's
problem is its own result, naming the wrong fields, and leaves the others
alone. A created item's result carries the object as stored.

The kinds that say ``created_in_batches`` are created this way (applications
and fleet pods). They have no secret fields: a result shows the object as it
was written, with nothing to hide from its writer.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, ValidationError
from starlette.responses import Response

from shoal.api.admission import dry_run, query_is_dry
from shoal.api.batch import results_response
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.machinery.problems import ProblemError, invalid_error, validation_problem
from shoal.model import registry
from shoal.model.base import Kind, check_name
from shoal.store.base import AlreadyExists

MAX_ITEMS = 1000


class CreateBatch(BaseModel):
    """Body of a batch create: the objects, each naming its namespace."""

    items: list[dict[str, Any]] = Field(
        max_length=MAX_ITEMS,
        description="The objects to create, each with `metadata.namespace`.",
    )


def _refused(item: dict[str, Any], error: ProblemError) -> dict[str, Any]:
    """An item's result: its problem, named by the namespace and name it gave."""
    metadata = item.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    result: dict[str, Any] = {
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "status": error.status,
        "title": error.title,
        "detail": error.detail,
    }
    if error.errors:
        result["errors"] = error.errors
    return result


def _model(kind: type[Kind], item: dict[str, Any]) -> Kind | dict[str, Any]:
    """The item as ``kind``, or its refusal (422, naming each wrong field of the item)."""
    try:
        obj = kind.model_validate(item)
    except ValidationError as error:
        return _refused(item, validation_problem(error))
    if kind.namespaced:
        field = "metadata.namespace"
        namespace = obj.metadata.namespace
        try:
            if not namespace:
                raise ValueError("required: an item of a batch names its namespace")
            check_name(namespace)  # in a single create the URL's pattern checks it
        except ValueError as error:
            return _refused(item, invalid_error([{"field": field, "reason": str(error)}]))
    return obj


async def create_many(
    resources: Resources, kind: type[Kind], items: list[Any]
) -> list[dict[str, Any]]:
    """Create every item as ``kind`` in one store commit: one result per item, in order.

    A result is ``status`` 200 with the ``resource_version`` and the stored
    ``object``, or the status, title, detail and wrong fields of its problem.
    """
    checked = [_model(kind, item) for item in items]
    results: list[dict[str, Any]] = []
    async with resources.store.batch():
        for item, obj in zip(items, checked, strict=True):
            if isinstance(obj, dict):
                results.append(obj)
                continue
            meta = obj.metadata
            try:
                value, revision = await resources.create_at(kind, obj, meta.namespace)
            except AlreadyExists:
                where = f" in namespace {meta.namespace!r}" if meta.namespace else ""
                detail = f"{kind.kind_name()} {meta.name!r}{where} already exists"
                exists = ProblemError(409, detail, "RESOURCE_ALREADY_EXISTS")
                results.append(_refused(item, exists))
            except ProblemError as error:
                results.append(_refused(item, error))
            else:
                results.append({
                    "namespace": meta.namespace,
                    "name": meta.name,
                    "status": 200,
                    "resource_version": revision,
                    "object": orjson.Fragment(value),
                })
    return results


async def create_requested(
    resources: Resources, kind: type[Kind], request: Request, body: CreateBatch
) -> list[dict[str, Any]]:
    """The results of a batch create of ``kind`` (``?dry_run=true`` stores nothing)."""
    with dry_run(query_is_dry(request.query_params)):
        return await create_many(resources, kind, body.items)


def build_router(resources: Resources) -> APIRouter:
    """The documented routes; ``shoal.api.fastpath`` answers the same requests first."""
    router = APIRouter(route_class=StrictJsonRoute)
    for path, kind in registry.BATCH_CREATES.items():
        name = kind.kind_name()

        def endpoint(kind: type[Kind] = kind) -> Any:
            async def create_batch(request: Request, body: CreateBatch) -> Response:
                return results_response(await create_requested(resources, kind, request, body))

            return create_batch

        router.add_api_route(
            path,
            endpoint(),
            methods=["POST"],
            name=f"create_{kind.plural}_many",
            summary=f"Create many {name} objects in one request",
            description=(
                f"Each item is a {name}, as the body of a single create, with its "
                "`metadata.namespace`. The creates share one store commit. The answer "
                "has one result per item, in order: `status` 200 with the "
                "`resource_version` and the stored `object`, or the status, title, "
                "detail and wrong `errors` of its problem (422 for a bad item, 409 "
                "when it exists, 403 for a namespace the user may not create in). "
                f"At most {MAX_ITEMS} items; `?dry_run=true` stores nothing."
            ),
            tags=[kind.api_name()],
        )
    return router
