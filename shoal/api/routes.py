"""Routes for every kind in the registry, in Krake's layout.

Endpoints are built per kind with explicit signatures (``__signature__``), so
FastAPI validates bodies with the kind's model and ``/openapi.json`` documents
every route. Responses are the stored bytes, not re-serialised models.
"""

import functools
import hmac
import inspect
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Body, Path, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from shoal.api.admission import with_dry_run
from shoal.api.auth.context import VISIBLE_NAMESPACE, writer
from shoal.api.codec import list_body
from shoal.api.resources import Resources
from shoal.api.strict import StrictJsonRoute
from shoal.api.watch import watch_response
from shoal.machinery.names import MAX_OBJECT_NAME, OBJECT_NAME
from shoal.machinery.problems import ProblemError
from shoal.model import application_status
from shoal.model.base import Kind, utcnow
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.model.subresources import (
    ApplicationBinding,
    ClusterBinding,
    CompleteToken,
    ShutdownToken,
)

NAME_PATTERN = OBJECT_NAME.pattern
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
    return Path(
        min_length=1, max_length=MAX_OBJECT_NAME, pattern=NAME_PATTERN, description=f"{what} name"
    )


def _sign(fn: Callable[..., Any], params: list[inspect.Parameter]) -> Callable[..., Any]:
    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return fn


def _p(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


# Every endpoint takes the request: its app's Resources (``app.state.resources``).
_REQUEST = inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)


def _res(kw: dict[str, Any]) -> Resources:
    """The Resources of the app that received the request (routes are shared by apps)."""
    resources: Resources = kw["request"].app.state.resources
    return resources


def _json(content: bytes) -> Response:
    return Response(content, media_type=_JSON)


# verb: (method, path, operation name, summary). Paths: {collection}, {every} (the list
# across namespaces), {item}; the names of operations are stable (clients generate from them).
_VERBS: dict[str, tuple[str, str, str, str]] = {
    "create": ("POST", "{collection}", "create_{plural}", "Create a {kind}"),
    "list": ("GET", "{collection}", "list_{plural}", "List or watch {kind} objects"),
    "list_all": (
        "GET",
        "{every}",
        "list_all_{plural}",
        "List or watch {kind} objects of every namespace",
    ),
    "read": ("GET", "{item}", "read_{plural}", "Read a {kind}"),
    "update": (
        "PUT",
        "{item}",
        "update_{plural}",
        "Update a {kind} (compare-and-swap when metadata.resource_version is set)",
    ),
    "delete": ("DELETE", "{item}", "delete_{plural}", "Delete a {kind} (finalizers run first)"),
    "status": (
        "PUT",
        "{item}/status",
        "update_{plural}_status",
        "Update the status of a {kind} (the whole object is sent)",
    ),
    "patch_status": (
        "PATCH",
        "{item}/status",
        "patch_{plural}_status",
        "Change some status fields of a {kind} (JSON merge patch of the writer's own fields, "
        "compare-and-swap; metadata.resource_version, when given, is a precondition)",
    ),
    "patch_finalizers": (
        "PATCH",
        "{item}",
        "patch_{plural}",
        "Set the finalizers of a {kind} (JSON merge patch of metadata.finalizers alone; "
        "metadata.resource_version, when given, is a precondition; modified stays)",
    ),
    "finalizers": (
        "PUT",
        "{item}/finalizers",
        "update_{plural}_finalizers",
        "Set the finalizers of a {kind} alone (metadata.finalizers; metadata.resource_version, "
        "when given, is a precondition): the right to drop a finalizer without the right to "
        "change the object",
    ),
    "bind_cloud": ("PUT", "{item}/binding", "update_{plural}_binding", "Bind a cluster to a cloud"),
    "bind_cluster": (
        "PUT",
        "{item}/binding",
        "update_{plural}_binding",
        "Bind an application to a cluster",
    ),
    "complete": (
        "PUT",
        "{item}/complete",
        "update_{plural}_complete",
        "Signal that the application completed (deletes it)",
    ),
    "shutdown": (
        "PUT",
        "{item}/shutdown",
        "update_{plural}_shutdown",
        "Signal that the application shut down gracefully",
    ),
    "retry": (
        "PUT",
        "{item}/retry",
        "update_{plural}_retry",
        "Retry a FAILED or waiting application at once (scheduling, deployment or deletion)",
    ),
}

_FINALIZERS_EXAMPLE = {"metadata": {"resource_version": 42, "finalizers": ["shoal.kube/resources"]}}
_PATCH_EXAMPLE = {"metadata": {"resource_version": 42}, "status": {"deploy_state": "RUNNING"}}

# verb → (endpoint, its parameters, response model)
_Handlers = dict[str, tuple[Callable[..., Any], list[inspect.Parameter], type[BaseModel] | None]]


@functools.cache
def build_router(kinds: tuple[type[Kind], ...]) -> APIRouter:
    """The routes of ``kinds``, built once per process and shared by every app in it.

    FastAPI analyses each route's signature and models when it is added: about
    0.1 s for the hundred-odd routes of the registry, at every API start (the
    test suite starts hundreds). An included router is kept by reference, so
    its endpoints find their app's ``Resources`` in the request, not in a closure.
    """
    router = APIRouter(route_class=StrictJsonRoute)
    for kind in kinds:
        api, plural = kind.api_name(), kind.plural
        collection = f"/{api}/namespaces/{{namespace}}/{plural}" if kind.namespaced else None
        paths = {
            "collection": collection or f"/{api}/{plural}",
            "every": f"/{api}/{plural}",
            "item": (collection or f"/{api}/{plural}") + "/{name}",
        }
        for verb, (endpoint, params, model) in _kind_handlers(kind).items():
            method, path, name, summary = _VERBS[verb]
            params = [*params, _REQUEST]
            if method != "GET":
                endpoint, params = with_dry_run(endpoint, params)
            router.add_api_route(
                path.format(**paths),
                _sign(endpoint, params),
                methods=[method],
                name=name.format(plural=plural),
                summary=summary.format(kind=kind.kind_name()),
                response_model=model,
                responses=_PROBLEMS,
                tags=[api],
            )
    return router


def _list_params() -> list[inspect.Parameter]:
    return [
        _p(
            "label_selector",
            str | None,
            Query(None, max_length=4096, description="k=v,k!=v,k in (a,b)"),
        ),
        _p(
            "field_selector",
            str | None,
            Query(None, max_length=4096, description="status.state=RUNNING,spec.x!=y"),
        ),
        _p("limit", int | None, Query(None, ge=1, le=100_000, description="Page size")),
        _p("continue_", str | None, Query(None, alias="continue", max_length=4096)),
        _p("watch", str | None, Query(None, description="Present: stream events (ndjson)")),
        _p(
            "heartbeat",
            float,
            Query(10.0, gt=0, le=3600, description="Seconds between heartbeats"),
        ),
        _p(
            "resource_version",
            int | None,
            Query(None, ge=0, description="Watch after this revision"),
        ),
    ]


def _kind_handlers(kind: type[Kind]) -> _Handlers:
    """The endpoints of one kind, by verb, with the parameters FastAPI validates."""
    ns_params = [_p("namespace", str, _name_param("Namespace"))] if kind.namespaced else []
    at_item = [*ns_params, _p("name", str, _name_param(kind.kind_name()))]
    with_body = [*at_item, _p("body", kind, Body())]
    list_params = _list_params()

    def ns(kwargs: dict[str, Any]) -> str | None:
        return kwargs.get("namespace") if kind.namespaced else None

    async def create(**kw: Any) -> Response:
        return _json(await _res(kw).create(kind, kw["body"], ns(kw)))

    async def list_(**kw: Any) -> Response:
        if kw["watch"] is not None and kw["watch"].lower() not in ("false", "0", "no"):
            return await watch_response(_res(kw), kind, ns(kw), kw)
        items, revision, token = await _res(kw).list_bytes(
            kind,
            ns(kw),
            kw["label_selector"],
            kw["limit"],
            kw["continue_"],
            kw["field_selector"],
            VISIBLE_NAMESPACE.get(),
        )
        return _json(list_body(kind.api_name(), kind.kind_name(), revision, items, token))

    async def list_all(**kw: Any) -> Response:
        return await list_(**kw)

    async def read(**kw: Any) -> Response:
        return _json(await _res(kw).get_bytes(kind, kw["name"], ns(kw)))

    async def update(**kw: Any) -> Response:
        return _json(await _res(kw).update(kind, kw["body"], kw["name"], ns(kw)))

    async def delete(**kw: Any) -> Response:
        return _json(await _res(kw).delete(kind, kw["name"], ns(kw), kw.get("force", False)))

    async def status(**kw: Any) -> Response:
        name = writer(kw["request"].scope)
        return _json(await _res(kw).update_status(kind, kw["body"], kw["name"], ns(kw), name))

    async def patch_status(**kw: Any) -> Response:
        name = writer(kw["request"].scope)
        return _json(await _res(kw).patch_status(kind, kw["name"], ns(kw), kw["body"], name))

    async def bind_cloud(**kw: Any) -> Response:
        return _json(await _res(kw).bind_cluster(kw["name"], ns(kw), kw["body"]))

    handlers: _Handlers = {
        "create": (create, [*ns_params, _p("body", kind, Body())], kind),
        "list": (list_, [*ns_params, *list_params], None),
    }
    if kind.namespaced:
        handlers["list_all"] = (list_all, list_params, None)
    handlers["read"] = (read, at_item, kind)
    handlers["update"] = (update, with_body, kind)
    handlers["delete"] = (delete, at_item, kind)
    if kind is Cluster:
        force = Query(False, description="Delete at once, without moving its applications first")
        handlers["delete"] = (delete, [*at_item, _p("force", bool, force)], kind)
    if "status" in kind.subresources:
        handlers["status"] = (status, with_body, kind)
        patch_body = _p("body", dict[str, Any], Body(examples=[_PATCH_EXAMPLE]))
        handlers["patch_status"] = (patch_status, [*at_item, patch_body], kind)
    if "finalizers" in kind.subresources:

        async def finalizers(**kw: Any) -> Response:
            return _json(await _res(kw).patch_finalizers(kind, kw["name"], ns(kw), kw["body"]))

        body = _p("body", dict[str, Any], Body(examples=[_FINALIZERS_EXAMPLE]))
        handlers["finalizers"] = (finalizers, [*at_item, body], kind)
    if kind is Application:
        handlers.update(_application_handlers(at_item))
    elif "binding" in kind.subresources:
        handlers["bind_cloud"] = (bind_cloud, [*at_item, _p("body", ClusterBinding, Body())], kind)
    return handlers


def _application_handlers(at_item: list[inspect.Parameter]) -> _Handlers:
    async def bind_cluster(**kw: Any) -> Response:
        return _json(await _res(kw).bind_application(kw["name"], kw["namespace"], kw["body"]))

    async def complete(**kw: Any) -> Response:
        res = _res(kw)
        app = await _hooked(res, kw, "complete")
        _check_token(app.status.complete_token, kw["body"].token, "complete")
        return _json(await res.delete(Application, kw["name"], kw["namespace"]))

    async def shutdown(**kw: Any) -> Response:
        res = _res(kw)
        app = await _hooked(res, kw, "shutdown")
        _check_token(app.status.shutdown_token, kw["body"].token, "shutdown")
        return _json(await res.set_application_state(kw["name"], kw["namespace"], _shut_down))

    async def retry(**kw: Any) -> Response:
        return _json(await _res(kw).set_application_state(kw["name"], kw["namespace"], _retry))

    async def patch_finalizers(**kw: Any) -> Response:
        name, namespace = kw["name"], kw["namespace"]
        return _json(await _res(kw).patch_finalizers(Application, name, namespace, kw["body"]))

    def body(model: type[BaseModel]) -> list[inspect.Parameter]:
        return [*at_item, _p("body", model, Body())]

    return {
        "bind_cluster": (bind_cluster, body(ApplicationBinding), Application),
        "complete": (complete, body(CompleteToken), Application),
        "shutdown": (shutdown, body(ShutdownToken), Application),
        "retry": (retry, at_item, Application),
        "patch_finalizers": (
            patch_finalizers,
            [*at_item, _p("body", dict[str, Any], Body(examples=[_FINALIZERS_EXAMPLE]))],
            Application,
        ),
    }


def _shut_down(current: Application) -> bool:
    """The workload confirms it shut down: READY_FOR_ACTION, if its copy was waiting for
    that (WAITING_FOR_CLEANING, or DEGRADED), as Krake; otherwise nothing changes."""
    status = current.status
    application_status.fold_explicit(status)  # a state stored by a Krake client
    waiting = (ApplicationState.WAITING_FOR_CLEANING, ApplicationState.DEGRADED)
    if status.deploy_state not in waiting:
        return False
    status.deploy_state = ApplicationState.READY_FOR_ACTION
    application_status.apply(status)
    return True


def _retry(current: Application) -> bool:
    """A FAILED or waiting application (placement, or a deployment retried after a failure
    such as a CONFLICT) is tried again at once, its failure counts reset."""
    status = current.status
    application_status.fold_explicit(status)  # a state stored by a Krake client
    waiting = (
        status.state in (ApplicationState.PENDING, ApplicationState.DEGRADED)
        and status.schedule_reason is not None
    )
    deploy_waiting = status.deploy_reason is not None and bool(status.retries)  # e.g. CONFLICT
    if status.state is not ApplicationState.FAILED and not waiting and not deploy_waiting:
        raise ProblemError(
            400,
            f"status.state: only a FAILED or waiting application can be retried, "
            f"this one is {status.state.value}",
            title="INVALID_STATE",
        )
    if current.metadata.deleted is not None:
        status.deploy_state = ApplicationState.DELETING
    else:
        status.schedule_reason = None
        status.scheduler_retries = None
        status.scheduler_attempts = 0
        status.next_retry = None
        if status.deploy_state is ApplicationState.FAILED:
            status.deploy_state = None
    status.deploy_reason = None
    status.retries = None
    application_status.apply(status)
    current.metadata.modified = utcnow()  # the scheduler passes it again at once
    return True


async def _hooked(res: Resources, kw: dict[str, Any], hook: str) -> Application:
    """The application a hook call names. A missing one is answered as a wrong token: the
    call needs no login, so its answer may not tell which applications exist."""
    try:
        return await res.get(Application, kw["name"], kw["namespace"])
    except ProblemError as error:
        if error.status != 404:
            raise
        _check_token(None, None, hook)
        raise


def _check_token(expected: str | None, given: str | None, what: str) -> None:
    """The hook's token is the workload's credential: compared in constant time, so the
    answer's timing tells nothing of how much of a guess was right."""
    if expected is None or given is None or not hmac.compare_digest(
        given.encode(), expected.encode()
    ):
        raise ProblemError(401, f"token: not the {what} token of this application", "UNAUTHORIZED")


