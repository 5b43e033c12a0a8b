"""Fleet pods' status writes in batches: ``POST /scheduling/podstatuses``.

The fleet scheduler writes a status for every pod it places; one request and
one store commit for a batch of them costs the API a fraction of a request
per pod. Each item replaces the pod's status under compare-and-swap, and only
on the pod of that uid (a pod deleted and made again under its name answers
404, as a deleted one does).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter

from shoal.api.batch import add_batch_route, each_item
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.machinery.problems import ProblemError
from shoal.model.pods import Pod, PodStatusBatch, PodStatusItem

PATH = "/scheduling/podstatuses"


async def write_statuses(
    resources: Resources, items: list[PodStatusItem]
) -> list[dict[str, Any]]:
    """Each item's pod status, on the pod of its uid, in one commit: one result per item."""

    async def one(item: PodStatusItem) -> bytes:
        status = orjson.loads(item.status.model_dump_json())

        def change(data: dict[str, Any]) -> bool:
            if data["metadata"].get("uid") != item.uid:
                raise ProblemError(404, f"Pod {item.name!r} of uid {item.uid} not found")
            data["status"] = status
            return True

        return await resources.swap_json(Pod, item.name, item.namespace, None, change)

    return await each_item(resources.store, items, one)


def build_router(resources: Resources) -> APIRouter:
    """The documented route; ``shoal.api.fastpath`` answers the same requests first."""
    router = APIRouter(route_class=StrictJsonRoute)

    async def write_many(body: PodStatusBatch) -> list[dict[str, Any]]:
        return await write_statuses(resources, body.items)

    add_batch_route(
        router,
        PATH,
        PodStatusBatch,
        write_many,
        name="update_pods_status_many",
        summary="Write the status of many fleet pods in one request",
        item="the pod's `status` and `uid`",
        problems="404 when the pod of that uid is gone",
    )
    return router
