"""Routes for every kind in the registry, in Krake's layout.

Endpoints are built per kind with explicit signatures (``__signature__``), so
FastAPI validates bodies with the kind's model and ``/openapi.json`` documents
every route. Responses are the stored bytes, not re-serialised models.
"""

import asyncio
import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from enum import Enum
from typing import Any

import orjson
from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.routing import APIRoute
from starlette.responses import Response, StreamingResponse

from shoal.api.codec import list_body, with_revision
from shoal.api.errors import ProblemError
from shoal.api.metrics import WATCHES
from shoal.api.resources import Resources, _parse_selector
from shoal.model.base import Kind, utcnow
from shoal.model.kubernetes import (
    Application,
    ApplicationBinding,
    ApplicationState,
    ClusterBinding,
    Token,
)
from shoal.store.base import Event, EventType

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$"
_JSON = "application/json"
_PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"description": desc, "content": {"application/problem+json": {}}}
    for code, desc in (
        (400, "Malformed request"),
        (404, "Not found"),
        (409, "Already exists or stale resource_version"),
        (410, "resource_version too old (watch)"),
        (422, "Invalid body: the problem names the field and the reason"),
    )
}


def _name_param(what: str) -> Any:
    return Path(min_length=1, max_length=63, pattern=NAME_PATTERN, description=f"{what} name")


def _sign(fn: Callable[..., Any], params: list[inspect.Parameter]) -> Callable[..., Any]:
    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return fn


def _p(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


def _json(content: bytes) -> Response:
    return Response(content, media_type=_JSON)


class _StrictJsonRequest(Request):
    """Bodies parsed by orjson: NaN and Infinity are not JSON and would be stored as null."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = orjson.loads(body)
            except orjson.JSONDecodeError as error:
                # FastAPI turns json.JSONDecodeError into a 400 "malformed JSON" problem.
                raise json.JSONDecodeError(error.msg, error.doc, error.pos) from None
        return self._json


class StrictJsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJsonRequest(request.scope, request.receive))

        return strict


def build_router(resources: Resources, kinds: tuple[type[Kind], ...]) -> APIRouter:
    router = APIRouter(route_class=StrictJsonRoute)
    for kind in kinds:
        _kind_routes(router, resources, kind)
    return router


def _kind_routes(router: APIRouter, res: Resources, kind: type[Kind]) -> None:
    api, plural, kname = kind.api_name(), kind.plural, kind.kind_name()
    snake = plural
    ns_params: list[inspect.Parameter] = []
    if kind.namespaced:
        collection = f"/{api}/namespaces/{{namespace}}/{plural}"
        ns_params = [_p("namespace", str, _name_param("Namespace"))]
    else:
        collection = f"/{api}/{plural}"
    item = collection + "/{name}"
    name_param = _p("name", str, _name_param(kname))
    tags: list[str | Enum] = [api]

    def ns(kwargs: dict[str, Any]) -> str | None:
        return kwargs.get("namespace") if kind.namespaced else None

    # create
    async def create(**kw: Any) -> Response:
        return _json(await res.create(kind, kw["body"], ns(kw)))

    router.add_api_route(
        collection,
        _sign(create, [*ns_params, _p("body", kind, Body())]),
        methods=["POST"],
        name=f"create_{snake}",
        summary=f"Create a {kname}",
        response_model=kind,
        responses=_PROBLEMS,
        tags=tags,
    )

    # list / watch
    list_params = [
        _p(
            "label_selector",
            str | None,
            Query(None, max_length=4096, description="k=v,k!=v,k in (a,b)"),
        ),
        _p("limit", int | None, Query(None, ge=1, le=100_000, description="Page size")),
        _p("continue_", str | None, Query(None, alias="continue", max_length=4096)),
        _p("watch", str | None, Query(None, description="Present: stream events (ndjson)")),
        _p(
            "heartbeat", float, Query(10.0, gt=0, le=3600, description="Seconds between heartbeats")
        ),
        _p(
            "resource_version",
            int | None,
            Query(None, ge=0, description="Watch after this revision"),
        ),
    ]

    async def list_(**kw: Any) -> Response:
        namespace = kw.get("namespace") if kind.namespaced else None
        if kw["watch"] is not None and kw["watch"].lower() not in ("false", "0", "no"):
            return await _watch(res, kind, namespace, kw)
        items, revision, token = await res.list_bytes(
            kind, namespace, kw["label_selector"], kw["limit"], kw["continue_"]
        )
        return _json(list_body(api, kname, revision, items, token))

    router.add_api_route(
        collection,
        _sign(list_, [*ns_params, *list_params]),
        methods=["GET"],
        name=f"list_{snake}",
        summary=f"List or watch {kname} objects",
        responses=_PROBLEMS,
        tags=tags,
    )
    if kind.namespaced:

        async def list_all(**kw: Any) -> Response:
            return await list_(**kw)

        router.add_api_route(
            f"/{api}/{plural}",
            _sign(list_all, list_params),
            methods=["GET"],
            name=f"list_all_{snake}",
            summary=f"List or watch {kname} objects of every namespace",
            responses=_PROBLEMS,
            tags=tags,
        )

    # read
    async def read(**kw: Any) -> Response:
        return _json(await res.get_bytes(kind, kw["name"], ns(kw)))

    router.add_api_route(
        item,
        _sign(read, [*ns_params, name_param]),
        methods=["GET"],
        name=f"read_{snake}",
        summary=f"Read a {kname}",
        response_model=kind,
        responses=_PROBLEMS,
        tags=tags,
    )

    # update
    async def update(**kw: Any) -> Response:
        return _json(await res.update(kind, kw["body"], kw["name"], ns(kw)))

    router.add_api_route(
        item,
        _sign(update, [*ns_params, name_param, _p("body", kind, Body())]),
        methods=["PUT"],
        name=f"update_{snake}",
        summary=f"Update a {kname} (compare-and-swap when metadata.resource_version is set)",
        response_model=kind,
        responses=_PROBLEMS,
        tags=tags,
    )

    # delete
    async def delete(**kw: Any) -> Response:
        return _json(await res.delete(kind, kw["name"], ns(kw)))

    router.add_api_route(
        item,
        _sign(delete, [*ns_params, name_param]),
        methods=["DELETE"],
        name=f"delete_{snake}",
        summary=f"Delete a {kname} (finalizers run first)",
        response_model=kind,
        responses=_PROBLEMS,
        tags=tags,
    )

    if "status" in kind.subresources:

        async def status(**kw: Any) -> Response:
            return _json(await res.update_status(kind, kw["body"], kw["name"], ns(kw)))

        router.add_api_route(
            item + "/status",
            _sign(status, [*ns_params, name_param, _p("body", kind, Body())]),
            methods=["PUT"],
            name=f"update_{snake}_status",
            summary=f"Update the status of a {kname} (the whole object is sent)",
            response_model=kind,
            responses=_PROBLEMS,
            tags=tags,
        )

    if kind is Application:
        _application_routes(router, res, item, ns_params, name_param, tags)
    elif "binding" in kind.subresources:

        async def bind_cluster(**kw: Any) -> Response:
            return _json(await res.bind_cluster(kw["name"], ns(kw), kw["body"]))

        router.add_api_route(
            item + "/binding",
            _sign(bind_cluster, [*ns_params, name_param, _p("body", ClusterBinding, Body())]),
            methods=["PUT"],
            name=f"update_{snake}_binding",
            summary="Bind a cluster to a cloud",
            response_model=kind,
            responses=_PROBLEMS,
            tags=tags,
        )


def _application_routes(
    router: APIRouter,
    res: Resources,
    item: str,
    ns_params: list[inspect.Parameter],
    name_param: inspect.Parameter,
    tags: list[str | Enum],
) -> None:
    async def binding(**kw: Any) -> Response:
        return _json(await res.bind_application(kw["name"], kw["namespace"], kw["body"]))

    router.add_api_route(
        item + "/binding",
        _sign(binding, [*ns_params, name_param, _p("body", ApplicationBinding, Body())]),
        methods=["PUT"],
        name="update_applications_binding",
        summary="Bind an application to a cluster",
        response_model=Application,
        responses=_PROBLEMS,
        tags=tags,
    )

    async def complete(**kw: Any) -> Response:
        app = await res.get(Application, kw["name"], kw["namespace"])
        _check_token(app.status.complete_token, kw["body"].token, "complete")
        return _json(await res.delete(Application, kw["name"], kw["namespace"]))

    async def shutdown(**kw: Any) -> Response:
        app = await res.get(Application, kw["name"], kw["namespace"])
        _check_token(app.status.shutdown_token, kw["body"].token, "shutdown")

        def ready(current: Application) -> bool:
            current.status.state = ApplicationState.READY_FOR_ACTION
            return True

        await res.set_application_state(kw["name"], kw["namespace"], ready)
        return _json(await res.delete(Application, kw["name"], kw["namespace"]))

    async def retry(**kw: Any) -> Response:
        def again(current: Application) -> bool:
            status = current.status
            if status.state is not ApplicationState.FAILED:
                raise ProblemError(
                    400,
                    f"status.state: only a FAILED application can be retried, "
                    f"this one is {status.state.value}",
                    title="INVALID_STATE",
                )
            if current.metadata.deleted is not None:
                status.state = ApplicationState.DELETING
            else:
                status.state = ApplicationState.PENDING
                status.scheduler_retries = None
            status.reason = None
            status.retries = None
            current.metadata.modified = utcnow()
            return True

        return _json(await res.set_application_state(kw["name"], kw["namespace"], again))

    for sub, fn, summary in (
        ("complete", complete, "Signal that the application completed (deletes it)"),
        ("shutdown", shutdown, "Signal that the application shut down gracefully"),
    ):
        router.add_api_route(
            item + f"/{sub}",
            _sign(fn, [*ns_params, name_param, _p("body", Token, Body())]),
            methods=["PUT"],
            name=f"update_applications_{sub}",
            summary=summary,
            response_model=Application,
            responses=_PROBLEMS,
            tags=tags,
        )
    router.add_api_route(
        item + "/retry",
        _sign(retry, [*ns_params, name_param]),
        methods=["PUT"],
        name="update_applications_retry",
        summary="Retry a FAILED application (scheduling or deletion)",
        response_model=Application,
        responses=_PROBLEMS,
        tags=tags,
    )


def _check_token(expected: str | None, given: str | None, what: str) -> None:
    if expected is None or given != expected:
        raise ProblemError(401, f"token: not the {what} token of this application", "UNAUTHORIZED")


# watch ------------------------------------------------------------------------


async def _watch(
    res: Resources, kind: type[Kind], namespace: str | None, kw: dict[str, Any]
) -> Response:
    from_revision: int | None = kw["resource_version"]
    if from_revision is not None:
        await res.store.check_revision(from_revision)  # Compacted → 410 before streaming
    else:
        from_revision = await res.store.revision()
    prefix = kind.key_prefix(namespace)
    queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue(maxsize=10_000)
    start = from_revision

    async def pump() -> None:
        try:
            async for event in res.store.watch(prefix, start):
                await queue.put(event)
            await queue.put(None)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # the stream must end, whatever the store says
            await queue.put(error)

    task = asyncio.create_task(pump())
    selector = kw["label_selector"]
    parsed = _parse_selector(selector)
    heartbeat: float = kw["heartbeat"]

    async def stream() -> AsyncIterator[bytes]:
        WATCHES.inc()
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), heartbeat)
                except TimeoutError:
                    yield b"\n"
                    continue
                if item is None or isinstance(item, BaseException):
                    return
                yield _event_line(item, parsed)
                # Drain what is already queued into one chunk: fewer, larger writes.
                chunk: list[bytes] = []
                while not queue.empty() and len(chunk) < 500:
                    more = queue.get_nowait()
                    if more is None or isinstance(more, BaseException):
                        if chunk:
                            yield b"".join(chunk)
                        return
                    chunk.append(_event_line(more, parsed))
                if chunk:
                    yield b"".join(chunk)
        finally:
            WATCHES.dec()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    return StreamingResponse(stream(), media_type="application/x-ndjson")


def _event_line(event: Event, selector: Any) -> bytes:
    if selector is not None:
        labels = orjson.loads(event.value)["metadata"].get("labels") or {}
        if not selector.matches(labels):
            return b""
    kind = event.type.value if isinstance(event.type, EventType) else str(event.type)
    return (
        b'{"type":"'
        + kind.encode()
        + b'","object":'
        + with_revision(event.value, event.revision)
        + b"}\n"
    )
