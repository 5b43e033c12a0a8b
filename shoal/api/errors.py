"""RFC 7807 problem documents: the one error model of the API.

Every error leaves the API as ``application/problem+json`` with a machine code
in ``title`` and, for bad input, the failing fields in ``errors`` (and named in
``detail``). No stack trace ever reaches the user.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from shoal.model.validation import field_path
from shoal.store.base import AlreadyExists, Compacted, Conflict, NotFound, Unavailable

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"

_TITLES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND_ERROR",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "TRANSACTION_ERROR",
    410: "RESOURCE_VERSION_TOO_OLD",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    422: "INVALID_RESOURCE",
    429: "TOO_MANY_REQUESTS",
    500: "INTERNAL_ERROR",
    503: "STORE_UNAVAILABLE",
}


class ProblemError(Exception):
    """Raise anywhere in a handler to answer with a problem document."""

    def __init__(
        self,
        status: int,
        detail: str,
        title: str | None = None,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or _TITLES.get(status, "ERROR")
        self.errors = errors


def problem(
    status: int,
    detail: str,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> Response:
    title = title or _TITLES.get(status, "ERROR")
    body: dict[str, Any] = {
        "type": f"urn:shoal:problem:{title.lower()}",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON)


def validation_errors(errors: list[Any]) -> list[dict[str, Any]]:
    out = []
    for error in errors:
        msg = str(error.get("msg", "invalid"))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        out.append({"field": field_path(error.get("loc", ())), "reason": msg})
    return out


def invalid(errors: list[dict[str, Any]]) -> Response:
    detail = "; ".join(f"{e['field']}: {e['reason']}" for e in errors[:10])
    return problem(422, detail, errors=errors)


def from_validation_error(error: ValidationError, prefix: tuple[str, ...] = ()) -> Response:
    errors = [
        {**e, "loc": (*prefix, *e.get("loc", ()))}
        for e in error.errors(include_url=False, include_input=False)
    ]
    return invalid(validation_errors(errors))


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
