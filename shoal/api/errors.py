"""The API's exception handlers: every error leaves as a problem document
(``shoal.machinery.problems``). No stack trace ever reaches the user."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from shoal.machinery.problems import (
    ProblemError,
    from_validation_error,
    invalid,
    problem,
    validation_errors,
)
from shoal.store.base import AlreadyExists, Compacted, Conflict, NotFound, Unavailable

log = logging.getLogger(__name__)

def install(app: FastAPI) -> None:
    """Register the handlers that turn every exception into a problem document."""

    @app.exception_handler(RequestValidationError)
    async def _request_validation(request: Request, exc: RequestValidationError) -> Response:
        errors = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            first = next(e for e in errors if e.get("type") == "json_invalid")
            reason = (first.get("ctx") or {}).get("error", "malformed JSON")
            return problem(
                400,
                f"body: malformed JSON: {reason}",
                errors=[{"field": "body", "reason": f"malformed JSON: {reason}"}],
            )
        if any(
            tuple(e.get("loc", ())) == ("body",) and isinstance(e.get("input"), bytes | str)
            for e in errors
        ):
            reason = "must be a JSON object sent with Content-Type: application/json"
            return problem(400, f"body: {reason}", errors=[{"field": "body", "reason": reason}])
        if request.method == "GET" and all(
            tuple(e.get("loc", ()))[:1] == ("path",) and e.get("type") == "string_pattern_mismatch"
            for e in errors
        ):
            # Nothing can have that name, so nothing is found: a read answers 404, as
            # Krake's API does (its controllers probe ``namespaces/None/...`` and expect it).
            where = ", ".join(str(e["loc"][-1]) for e in errors)
            return problem(404, f"not found: no object can have that {where}", "NOT_FOUND")
        return invalid(validation_errors(errors))

    @app.exception_handler(ValidationError)
    async def _validation(request: Request, exc: ValidationError) -> Response:
        return from_validation_error(exc)

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> Response:
        return problem(exc.status, exc.detail, exc.title, exc.errors)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> Response:
        return problem(404, f"{exc} not found")

    @app.exception_handler(AlreadyExists)
    async def _exists(request: Request, exc: AlreadyExists) -> Response:
        return problem(409, f"{exc} already exists", "RESOURCE_ALREADY_EXISTS")

    @app.exception_handler(Conflict)
    async def _conflict(request: Request, exc: Conflict) -> Response:
        return problem(
            409,
            f"metadata.resource_version {exc.expected} is stale: the object is at {exc.actual}",
        )

    @app.exception_handler(Compacted)
    async def _compacted(request: Request, exc: Compacted) -> Response:
        return problem(410, f"resource_version: {exc}; list again")

    @app.exception_handler(Unavailable)
    async def _unavailable(request: Request, exc: Unavailable) -> Response:
        return problem(503, f"store unavailable: {exc}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return problem(exc.status_code, detail)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "internal error; see the API server log")
