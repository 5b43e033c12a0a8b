"""Batch endpoints: many items in one request and one store commit, one result per item.

The scheduler's throughput rests on them (bindings, reschedule requests): one
round trip and one commit for up to a thousand small writes, where one item's
problem is its own result and leaves the others alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import orjson
from fastapi import APIRouter, Body
from pydantic import BaseModel
from starlette.responses import Response

from shoal.api.codec import revision_of
from shoal.machinery.problems import ProblemError
from shoal.store.base import Conflict, Store


class BatchItem(Protocol):
    namespace: str
    name: str


T = TypeVar("T", bound=BatchItem)
B = TypeVar("B", bound=BaseModel)


async def each_item(
    store: Store, items: Sequence[T], act: Callable[[T], Awaitable[bytes | int]]
) -> list[dict[str, Any]]:
    """Act on every item in one store commit: one result per item, in order.

    ``act`` answers the item's new wire bytes, or its new revision when it has
    it at hand (no search of the bytes for it). A result is ``status`` 200 with
    the new ``resource_version``, or the status, title and detail of the item's
    problem.
    """
    results: list[dict[str, Any]] = []
    async with store.batch():
        for item in items:
            result: dict[str, Any] = {"namespace": item.namespace, "name": item.name}
            try:
                value = await act(item)
                result["status"] = 200
                result["resource_version"] = value if isinstance(value, int) else revision_of(value)
            except Conflict as error:
                result.update(status=409, title="TRANSACTION_ERROR", detail=str(error))
            except ProblemError as error:
                result.update(status=error.status, title=error.title, detail=error.detail)
            results.append(result)
    return results


def results_response(results: list[dict[str, Any]]) -> Response:
    return Response(orjson.dumps({"results": results}), media_type="application/json")


def add_batch_route(
    router: APIRouter,
    path: str,
    model: type[B],
    run: Callable[[B], Awaitable[list[dict[str, Any]]]],
    *,
    name: str,
    summary: str,
    item: str,
    problems: str,
) -> None:
    """Document and serve ``POST path``: a ``model`` body answered by ``{"results": [...]}``."""

    async def endpoint(body: Any) -> Response:
        return results_response(await run(body))

    param = inspect.Parameter(
        "body", inspect.Parameter.KEYWORD_ONLY, annotation=model, default=Body()
    )
    endpoint.__signature__ = inspect.Signature([param])  # type: ignore[attr-defined]
    router.add_api_route(
        path,
        endpoint,
        methods=["POST"],
        name=name,
        summary=summary,
        description=(
            f"Each item is {item} plus the application's namespace and name. The answer has "
            "one result per item, in order: `status` 200 with the new `resource_version`, or "
            f"the status, title and detail of its problem ({problems})."
        ),
        tags=["scheduling"],
    )
