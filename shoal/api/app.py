"""The Shoal API server: FastAPI app over one store."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from shoal import ui
from shoal.api import (
    admission,
    creates,
    errors,
    events,
    fastpath,
    fleet,
    join,
    reschedule,
    scheduling,
    status_batch,
)
from shoal.api.auth import Protection
from shoal.api.auth.guard import Guard
from shoal.api.metrics import LATENCY, REQUESTS
from shoal.api.resources import Resources
from shoal.api.routes import build_router
from shoal.machinery.asgi import ASGIApp, Message, Receive, Scope, Send
from shoal.machinery.problems import problem
from shoal.model import registry
from shoal.model.base import Kind
from shoal.model.kubernetes import KUBE_FINALIZER, Application, Cluster
from shoal.model.validation.kubeconfig import set_credential_policy
from shoal.store.base import Store

MAX_BODY = 8 * 1024 * 1024



class BodyLimit:
    """Refuse bodies over ``limit`` bytes with 413, before they are read whole."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._too_large(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(self.limit)
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(413, f"body: larger than {self.limit} bytes")
        await response(scope, receive, send)


class _TooLarge(HTTPException):
    """An HTTPException, so FastAPI's body parsing re-raises it instead of answering 400."""

    def __init__(self, limit: int = MAX_BODY) -> None:
        super().__init__(413, f"body: larger than {limit} bytes")


def create_app(
    store: Store,
    *,
    title: str = "Shoal",
    security: Protection | None = None,
    kube_finalizer: bool = False,
) -> FastAPI:
    """The app over ``store``; with ``security``, every request passes its Guard.

    ``kube_finalizer``: each new application gets the kube controller's finalizer at
    its creation, which spares the kube controller a write (and every watcher an
    event) per application. Only where Shoal's kube controller deploys: Krake's never
    removes it.
    """
    if security is not None:
        store = security.store  # secret fields sealed on the way to the store
    # Which kubeconfig credentials that act on this host tenants may give (none by default).
    set_credential_policy(security.security.kubeconfig if security is not None else None)
    at_create: dict[type[Kind], tuple[str, ...]] = (
        {Application: (KUBE_FINALIZER,)} if kube_finalizer else {}
    )
    resources = Resources(store, finalizers_at_create=at_create)
    admission.log_schema_status()  # once per server: are manifests held to Kubernetes' schemas

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield

    app = _App(
        title=title,
        version="0.1.0",
        description="Multi-cluster application scheduler: Krake-compatible REST API.",
        lifespan=lifespan,
        # Shoal's own metrics are Prometheus' (docs/observability.md). FastAPI's OpenTelemetry
        # hooks looked up the global providers on every request: 3 % of a create's CPU.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.store = store
    app.state.resources = resources
    errors.install(app)
    # The hot routes are answered before FastAPI's router (see _App.build_middleware_stack);
    # FastAPI's routes of the same paths document them in /openapi.json.
    app.fast_routes = [*fastpath.routes(resources), events.fast_route(resources)]
    app.include_router(scheduling.build_router(resources))
    app.include_router(join.build_router(resources, security))  # pull clusters join
    hot: tuple[type[Kind], ...] = (Application, Cluster)
    kinds = (*hot, *(k for k in registry.KINDS if k not in hot))
    app.include_router(build_router(kinds))  # built once per process
    app.include_router(reschedule.build_router(resources))
    app.include_router(events.build_router(resources))  # POST /core/events (batches)
    app.include_router(fleet.build_router(resources))  # POST /scheduling/podstatuses
    app.include_router(status_batch.build_router(resources))  # application status batches
    app.include_router(creates.build_router(resources))  # creates in batches
    ui.mount(app)  # the web dashboard at /ui/

    @app.get("/healthz", tags=["health"], summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="The store answers")
    async def readyz() -> Response:
        try:
            revision = await store.revision()
        except Exception as error:
            return problem(503, f"store: {error}")
        return Response(b'{"status":"ok","revision":%d}' % revision, media_type="application/json")

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics of this API server")
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    if security is not None:
        app.add_middleware(Guard, **security.guard_options())
        origin = security.security.cors_origin
        if origin:  # outside the guard: a browser's preflight carries no credentials
            app.add_middleware(
                CORSMiddleware,
                allow_origins=[origin],
                allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                allow_headers=["authorization", "content-type", "x-auth-token"],
            )
    app.add_middleware(admission.Warnings)
    app.add_middleware(Measure)
    limit = security.security.limits.max_body if security is not None else MAX_BODY
    app.add_middleware(BodyLimit, limit=limit)
    return app


class _App(FastAPI):
    """FastAPI with a leaner stack, which keeps the connection after an unhandled error.

    Starlette answers an unhandled error with the 500 problem document
    (``errors.install`` logs it) and then raises it again for the server to log;
    uvicorn then drops the keep-alive connection, and the client's next request
    on it fails. Logged once is enough.
    """

    fast_routes: list[Route] = []

    def build_middleware_stack(self) -> ASGIApp:
        """FastAPI's stack without the layers Shoal does not use, hot routes before the router.

        Every layer a request passes through is resumed at each of the request's
        awaits (its body, its commit, its answer), so each costs on every write.
        Telemetry is off and ``BodyLimit`` bounds bodies: FastAPI's telemetry and
        body-limit layers go. The hot routes are answered inside the exception
        handlers and Shoal's own middleware, before the exit stack and the router
        of a hundred routes that only FastAPI's routes need.
        """
        error_handler = None
        handlers: dict[Any, Any] = {}
        for key, value in self.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
            else:
                handlers[key] = value
        app: ASGIApp = _Front(self.fast_routes, AsyncExitStackMiddleware(self.router))
        app = ExceptionMiddleware(app, handlers=handlers, debug=self.debug)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return ServerErrorMiddleware(app, handler=error_handler, debug=self.debug)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except Exception:
            if scope["type"] != "http":
                raise


class _Front:
    """Answer the hot routes (plain Starlette endpoints) at once; pass the rest on."""

    def __init__(self, routes: list[Route], app: ASGIApp) -> None:
        self.routes = routes
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self.routes:
                match, child = route.matches(scope)
                if match is Match.FULL:  # a PATCH of a GET's path is the router's 405
                    scope.update(child)
                    response = await route.endpoint(Request(scope, receive))
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


@functools.cache
def _series(method: str, path: str, status: int) -> tuple[Any, Any]:
    """The latency and request-count series of one route and answer: looked up once, not
    on every request (a labelled lookup takes the metric's lock; 2 % of a create)."""
    return LATENCY.labels(method, path), REQUESTS.labels(method, path, str(status))


class Measure:
    """Count requests and time them per route template (``scope['route']`` after routing)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def send_and_watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                route = scope.get("route")
                path = str(getattr(route, "path", "unmatched"))
                latency, requests = _series(scope["method"], path, message["status"])
                latency.observe(time.perf_counter() - start)
                requests.inc()
            await send(message)

        await self.app(scope, receive, send_and_watch)
