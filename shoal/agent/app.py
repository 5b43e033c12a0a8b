"""The agent's HTTP API (Starlette): samples, batches of samples, commits, health.

Starlette rather than FastAPI: four routes that validate their bodies with
pydantic themselves need no dependency injection or OpenAPI, and the agent
keeps the API server's stack (uvicorn on uvloop with httptools) and its one
error model, RFC 7807 problem documents from ``shoal.machinery.problems``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeVar

import orjson
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shoal.agent import stats
from shoal.agent.agent import Agent
from shoal.agent.callers import CallerCheck
from shoal.agent.commit import CommitRefused
from shoal.agent.framework import InvalidPod
from shoal.agent.locks import NodeBusy
from shoal.agent.pod import (
    BatchBody,
    CommitBatchBody,
    CommitBody,
    PodRequest,
    SampleBody,
    UidsBody,
)
from shoal.client.kube import KubeApiError, KubeUnreachable
from shoal.machinery.problems import ProblemError, from_validation_error, invalid, problem
from shoal.machinery.types import Obj

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


class Invalid(Exception):
    """A body that cannot be read: answered as it stands (400 or 422)."""

    def __init__(self, response: Response) -> None:
        self.response = response


async def _body(request: Request, model: type[M]) -> M:
    """Parsed and validated in one pass (pydantic reads the JSON itself: a batch of pods
    costs about 40 % less than decoding, then validating the objects)."""
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as error:
        for first in error.errors()[:1]:
            if first["type"] == "json_invalid":
                raise ProblemError(400, f"body: malformed JSON: {first['msg']}") from None
        raise Invalid(from_validation_error(error)) from None


def _pod(agent: Agent, body: SampleBody | CommitBody, prefix: str = "") -> PodRequest:
    try:
        return agent.request(body.pod)
    except InvalidPod as error:
        raise Invalid(invalid([{"field": prefix + error.field, "reason": error.reason}])) from None


def _strategy(agent: Agent, request: Request) -> str:
    name: str = request.path_params["strategy"]
    if name not in agent.pipeline.strategies:
        enabled = ", ".join(agent.pipeline.strategies) or "none"
        raise ProblemError(404, f"unknown sampling strategy {name!r}; enabled: {enabled}")
    if not agent.sync.listed:
        raise ProblemError(503, "the node cache has not listed the cluster yet")
    return name


def create_app(agent: Agent, callers: frozenset[bytes] | None = None) -> Starlette:
    """The agent's routes; ``callers``: the digests of the tokens it answers (None: anyone)."""
    def synced() -> None:
        if not agent.sync.synced:
            raise ProblemError(503, "the node cache is not watching the cluster; retry")

    async def healthz(request: Request) -> Response:
        body = agent.health()
        return _json(body, 200 if body["synced"] else 503)

    async def metrics(request: Request) -> Response:
        vector = agent.vector
        enabled = {"filters": vector.filters, "scores": list(vector.scores)}
        page = stats.metrics(vector.usable, enabled, vector.without_vector_form, agent.timings)
        return Response(page, media_type=CONTENT_TYPE_LATEST)

    async def sample(request: Request) -> Response:
        strategy = _strategy(agent, request)
        body = await _body(request, SampleBody)
        pod = _pod(agent, body)
        found = agent.sample(strategy, pod, body.nodesToSampleBp, body.keep)
        return _json(found.body(agent.config.cluster, body.keep))

    async def batch(request: Request) -> Response:
        strategy = _strategy(agent, request)
        body = await _body(request, BatchBody)
        pods = [_pod(agent, item, f"items[{i}].") for i, item in enumerate(body.items)]
        found = agent.sample_many(strategy, [(pod, item.nodesToSampleBp, item.keep)
                                             for pod, item in zip(pods, body.items, strict=True)])
        return _json({"items": [one.body(agent.config.cluster, item.keep)
                                for one, item in zip(found, body.items, strict=True)]})

    async def commit(body: CommitBody, prefix: str = "") -> tuple[int, Obj]:
        pod = _pod(agent, body, prefix)
        missing = [{"field": f"{prefix}pod.metadata.{name}", "reason": "required for a commit"}
                   for name in ("name", "uid") if not getattr(body.pod.metadata, name)]
        if missing:
            raise Invalid(invalid(missing))
        synced()
        done = await agent.commit(pod, body.nodeName)
        return 201 if done.created else 200, done.body()

    async def decision(request: Request) -> Response:
        status, answer = await commit(await _body(request, CommitBody))
        return _json(answer, status)

    async def decisions(request: Request) -> Response:
        """Many commits in one round trip, made concurrently; each answers as it would alone."""
        body = await _body(request, CommitBatchBody)

        async def one(i: int, item: CommitBody) -> Obj:
            try:
                status, answer = await commit(item, f"items[{i}].")
            except Exception as error:  # answered as the route would answer it
                response = await _answer(request, error)
                status, answer = response.status_code, orjson.loads(response.body)
            return {"status": status, "body": answer}

        return _json({"items": await asyncio.gather(*(one(i, item)
                                                     for i, item in enumerate(body.items)))})

    async def lookup(request: Request) -> Response:
        body = await _body(request, UidsBody)
        synced()  # a stale cache could miss a pod made before a restart
        return _json({"pods": agent.members.lookup(body.uids)})

    async def listing(request: Request) -> Response:
        synced()
        return _json({"pods": agent.members.listing()})

    async def delete(request: Request) -> Response:
        body = await _body(request, UidsBody)
        synced()
        deleted, absent = await agent.members.delete(body.uids)
        return _json({"deleted": deleted, "absent": absent})

    app = Starlette(
        routes=[
            Route("/agent/pods", listing, methods=["GET"]),
            Route("/agent/pods/lookup", lookup, methods=["POST"]),
            Route("/agent/pods/delete", delete, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/samples/{strategy}", sample, methods=["POST"]),
            Route("/samples/{strategy}/batch", batch, methods=["POST"]),
            Route("/agent/scheduling-decision", decision, methods=["POST"]),
            Route("/agent/scheduling-decisions", decisions, methods=["POST"]),
        ],
        exception_handlers=_HANDLERS,
    )
    if callers is not None:
        app.add_middleware(CallerCheck, callers=callers)
    return app


async def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Invalid)
    return exc.response


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProblemError)
    return problem(exc.status, exc.detail, exc.title, exc.errors)


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CommitRefused)
    title = "SCHEDULING_CONFLICT" if exc.status == 409 else None
    return problem(exc.status, exc.detail, title,
                   [{"field": "nodeName", "reason": exc.reason}] if exc.reason else None)


async def _busy(request: Request, exc: Exception) -> Response:
    return problem(503, f"node {exc} is busy with other commits; retry", "NODE_BUSY")


async def _cluster(request: Request, exc: Exception) -> Response:
    return problem(503, f"the member cluster did not take the pod: {exc}; "
                        "a retry with the same uid is safe", "CLUSTER_UNAVAILABLE")


async def _internal(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem(500, "internal error; see the agent's log")


async def _http(request: Request, exc: Exception) -> Response:
    status = int(getattr(exc, "status_code", 500))
    return problem(status, str(getattr(exc, "detail", "error")))


async def _answer(request: Request, error: Exception) -> Response:
    """The response the route's exception handlers give ``error``."""
    for kind, handler in _HANDLERS.items():
        if isinstance(kind, type) and isinstance(error, kind):
            response: Response = await handler(request, error)
            return response
    raise error


_HANDLERS: dict[Any, Any] = {
    Invalid: _invalid,
    ProblemError: _problem,
    CommitRefused: _refused,
    NodeBusy: _busy,
    KubeUnreachable: _cluster,
    KubeApiError: _cluster,
    404: _http,
    405: _http,
    Exception: _internal,
}
