"""Lean endpoints for the requests placement and running rest on.

Creating an application and committing a batch of bindings are what the
scheduler's throughput is made of, and status patches of applications and
clusters (alone, or in the kube controller's batches of statuses and
finalizers) what the kube controller and the observer write most; through
FastAPI's dependency machinery about half of such a request's CPU is spent
outside Shoal's own logic (a status patch: 750 µs, of which the patch itself
is 250). These plain Starlette endpoints parse and validate the same models,
call the same ``Resources`` methods and raise into the same error handlers.
They are matched before the FastAPI routes of the same paths, which stay
registered to document them in ``/openapi.json``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shoal.api import body as door
from shoal.api import creates, fleet, status_batch, unknown_fields
from shoal.api.admission import dry_run, query_is_dry, warn
from shoal.api.auth.context import writer
from shoal.api.batch import results_response
from shoal.api.resources import Resources
from shoal.machinery.names import object_name_problem
from shoal.machinery.problems import from_validation_error, problem
from shoal.model import registry
from shoal.model.base import Kind
from shoal.model.kubernetes import Application, Cluster
from shoal.model.pods import Pod, PodStatusBatch
from shoal.model.subresources import BindingBatch

M = TypeVar("M", bound=BaseModel)


def _bad_body(reason: str) -> Response:
    return problem(400, f"body: {reason}", errors=[{"field": "body", "reason": reason}])


async def read_json(request: Request) -> Any:
    """The request's body as strict JSON (parsed once, see ``shoal.api.body``), or the
    400 problem that says why not (the caller tells them apart by ``Response``)."""
    raw = await request.body()
    try:
        return door.parsed(request.scope, raw)
    except door.MalformedBody as error:
        return _bad_body(f"malformed JSON: {error}")


async def parse_body(request: Request, model: type[M]) -> M | Response:
    """The body as ``model``, its unknown fields dropped or refused as ``?fieldValidation=``
    says (``shoal.api.unknown_fields``); or the problem that says why not."""
    data = await read_json(request)
    if isinstance(data, Response):
        return data
    if not isinstance(data, dict):
        return _bad_body("must be a JSON object")
    mode = unknown_fields.mode_of(request.query_params)
    if mode is None:
        reason = "must be Strict, Warn or Ignore"
        return problem(422, f"{unknown_fields.PARAM}: {reason}",
                       errors=[{"field": unknown_fields.PARAM, "reason": reason}])  # fmt: skip
    for _ in unknown_fields.rounds():
        try:
            return model.model_validate(data)
        except ValidationError as error:
            found = unknown_fields.unknown(error.errors(include_url=False, include_input=False))
            if mode == unknown_fields.STRICT or not found:
                return from_validation_error(error)
            data, dropped = unknown_fields.without(data, found)
            if not dropped:
                return from_validation_error(error)
            door.replace(request.scope, data)
            if mode == unknown_fields.WARN:
                for path in dropped:
                    warn(unknown_fields.warning(path))
    return model.model_validate(data)  # raises the last error: a problem (shoal.api.errors)


def routes(resources: Resources) -> list[Route]:
    def create(kind: type[Kind]) -> Route:
        async def endpoint(request: Request) -> Response:
            request.scope["route"] = route  # the metrics middleware labels by route
            namespace = request.path_params["namespace"]
            if (reason := object_name_problem(namespace)) is not None:
                return problem(
                    422, f"namespace: {reason}", errors=[{"field": "namespace", "reason": reason}]
                )
            obj = await parse_body(request, kind)
            if isinstance(obj, Response):
                return obj
            with dry_run(query_is_dry(request.query_params)):
                content = await resources.create(kind, obj, namespace)
            return Response(content, media_type="application/json")

        path = f"/{kind.api_name()}/namespaces/{{namespace}}/{kind.plural}"
        route = Route(path, endpoint, methods=["POST"])
        return route

    def patch_status(kind: type[Kind]) -> Route:
        async def endpoint(request: Request) -> Response:
            request.scope["route"] = route
            params = request.path_params
            body = await read_json(request)
            if isinstance(body, Response):
                return body
            with dry_run(query_is_dry(request.query_params)):
                content = await resources.patch_status(
                    kind, params["name"], params.get("namespace"), body, writer(request.scope)
                )
            return Response(content, media_type="application/json")

        where = "/namespaces/{namespace}" if kind.namespaced else ""
        path = f"/{kind.api_name()}{where}/{kind.plural}/{{name}}/status"
        route = Route(path, endpoint, methods=["PATCH"])
        return route

    def batch(
        path: str,
        model: type[M],
        run: Callable[[Request, M], Awaitable[list[dict[str, Any]]]],
    ) -> Route:
        """``POST path``: a ``model`` body, one result per item (``shoal.api.batch``)."""

        async def endpoint(request: Request) -> Response:
            request.scope["route"] = route
            body = await parse_body(request, model)
            if isinstance(body, Response):
                return body
            return results_response(await run(request, body))

        route = Route(path, endpoint, methods=["POST"])
        return route

    def create_batch(path: str, kind: type[Kind]) -> Route:
        async def run(request: Request, body: creates.CreateBatch) -> list[dict[str, Any]]:
            return await creates.create_requested(resources, kind, request, body)

        return batch(path, creates.CreateBatch, run)

    return [
        create(Application),
        create(Pod),  # the fleet's pods, at hundreds per second
        *(create_batch(path, kind) for path, kind in registry.BATCH_CREATES.items()),
        batch("/scheduling/bindings", BindingBatch, lambda _, b: resources.bind_many(b)),
        batch(
            fleet.PATH,
            PodStatusBatch,
            lambda _, b: fleet.write_statuses(resources, b.items),
        ),
        batch(
            status_batch.PATH,
            status_batch.StatusPatchBatch,
            lambda request, b: status_batch.patch_statuses(
                resources, b.items, writer(request.scope)
            ),
        ),
        batch(
            status_batch.FINALIZERS_PATH,
            status_batch.FinalizersBatch,
            lambda _, b: status_batch.set_finalizers(resources, b.items),
        ),
        patch_status(Application),
        patch_status(Cluster),
    ]
