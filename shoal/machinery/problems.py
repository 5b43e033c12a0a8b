"""RFC 7807 problem documents: the one error model of every Shoal server.

Every error leaves the API (and an agent) as ``application/problem+json`` with a machine
code in ``title`` and, for bad input, the failing fields in ``errors`` (and named in
``detail``).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError
from starlette.responses import Response

from shoal.machinery.paths import field_path

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


def invalid_error(errors: list[dict[str, Any]]) -> ProblemError:
    """The 422 of wrong fields (``field``, ``reason``), the first ten in its detail."""
    detail = "; ".join(f"{e['field']}: {e['reason']}" for e in errors[:10])
    return ProblemError(422, detail, errors=errors)


def invalid(errors: list[dict[str, Any]]) -> Response:
    error = invalid_error(errors)
    return problem(error.status, error.detail, errors=error.errors)


def validation_problem(error: ValidationError, prefix: tuple[str, ...] = ()) -> ProblemError:
    """A pydantic error as the 422 naming each wrong field (under ``prefix``)."""
    errors = [
        {**e, "loc": (*prefix, *e.get("loc", ()))}
        for e in error.errors(include_url=False, include_input=False)
    ]
    return invalid_error(validation_errors(errors))


def from_validation_error(error: ValidationError, prefix: tuple[str, ...] = ()) -> Response:
    found = validation_problem(error, prefix)
    return problem(found.status, found.detail, errors=found.errors)
