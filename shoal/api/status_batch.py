"""Application status patches and finalizers in batches (``POST /scheduling/...``).

The kube controller writes an application's ``RUNNING`` (and its other
progress) once per application; one request and one store commit for a batch
of them costs the API a fraction of a request per application. Each item is
the merge patch of ``PATCH .../applications/{name}/status`` (the writer's own
fields only, checked per item) with its optional precondition. Its finalizer
goes the same way (``applicationfinalizers``), so that most of the controller's
writes share commits.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Request
from pydantic import Field, StrictInt
from starlette.responses import Response

from shoal.api.auth.authn import User
from shoal.api.auth.context import writer
from shoal.api.batch import add_batch_route, each_item, results_response
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.machinery.names import MAX_OBJECT_NAME
from shoal.model.base import Finalizer, Model
from shoal.model.kubernetes import Application

PATH = "/scheduling/applicationstatuses"
FINALIZERS_PATH = "/scheduling/applicationfinalizers"


class StatusPatchItem(Model):
    """One application's status merge patch."""

    namespace: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    name: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    status: dict[str, Any] = Field(description="The writer's own status fields (merge patch).")
    resource_version: StrictInt | None = Field(
        default=None, description="Patch only if the application is still at this revision."
    )


class FinalizersItem(Model):
    """One application's finalizers, set alone (``PATCH .../applications/{name}``)."""

    namespace: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    name: str = Field(min_length=1, max_length=MAX_OBJECT_NAME)
    finalizers: list[Finalizer] = Field(max_length=100)
    resource_version: StrictInt | None = Field(
        default=None, description="Set only if the application is still at this revision."
    )


class FinalizersBatch(Model):
    """Body of ``POST /scheduling/applicationfinalizers``: many finalizer writes, one request."""

    items: list[FinalizersItem] = Field(max_length=1000)


class StatusPatchBatch(Model):
    """Body of ``POST /scheduling/applicationstatuses``: many status patches, one request."""

    items: list[StatusPatchItem] = Field(max_length=1000)


async def patch_statuses(
    resources: Resources, items: list[StatusPatchItem], writer: User | None
) -> list[dict[str, Any]]:
    """Each item's status merge patch, as ``writer``, in one commit: one result per item."""

    async def one(item: StatusPatchItem) -> bytes:
        patch: dict[str, Any] = {"status": item.status}
        if item.resource_version is not None:
            patch["metadata"] = {"resource_version": item.resource_version}
        return await resources.patch_status(Application, item.name, item.namespace, patch, writer)

    return await each_item(resources.store, items, one)


async def set_finalizers(
    resources: Resources, items: list[FinalizersItem]
) -> list[dict[str, Any]]:
    """Each item's finalizers, in one commit: one result per item."""

    async def one(item: FinalizersItem) -> bytes:
        metadata: dict[str, Any] = {"finalizers": item.finalizers}
        if item.resource_version is not None:
            metadata["resource_version"] = item.resource_version
        body = {"metadata": metadata}
        return await resources.patch_finalizers(Application, item.name, item.namespace, body)

    return await each_item(resources.store, items, one)


def build_router(resources: Resources) -> APIRouter:
    """The documented routes; ``shoal.api.fastpath`` answers the same requests first."""
    router = APIRouter(route_class=StrictJsonRoute)

    async def patch_many(request: Request, body: StatusPatchBatch = Body()) -> Response:
        return results_response(await patch_statuses(resources, body.items, writer(request.scope)))

    async def finalizers_many(body: FinalizersBatch) -> list[dict[str, Any]]:
        return await set_finalizers(resources, body.items)

    add_batch_route(
        router,
        FINALIZERS_PATH,
        FinalizersBatch,
        finalizers_many,
        name="patch_applications_many",
        summary="Set the finalizers of many applications in one request",
        item="the `metadata.finalizers` of `PATCH .../applications/{name}`",
        problems="409 on a stale resource_version, 404",
    )
    router.add_api_route(
        PATH,
        patch_many,
        methods=["POST"],
        name="patch_applications_status_many",
        summary="Patch the status of many applications in one request",
        description=(
            "Each item is the merge patch of `PATCH .../applications/{name}/status` plus the "
            "application's namespace and name. The answer has one result per item, in order: "
            "`status` 200 with the new `resource_version`, or the status, title and detail of "
            "its problem (409 on a stale resource_version, 404, 403 for another writer's "
            "field, 422)."
        ),
        tags=["scheduling"],
    )
    return router
