"""Request bodies read once and strictly: the value the guard authorised is the value the
route validates, and fields a kind does not have are dropped, warned of or refused as
``?fieldValidation=`` says.

Every router of the API uses ``StrictJsonRoute``; it stands apart from the kinds' routes so
that the routers of batches, joins and scheduling take it without the verb table.
"""

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.responses import Response

from shoal.api import body as door
from shoal.api import unknown_fields
from shoal.api.admission import warn


class StrictJsonRequest(Request):
    """Bodies parsed once, strictly (``shoal.api.body``): the value the guard authorised."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            raw = await self.body()
            try:
                self._json = door.parsed(self.scope, raw)
            except door.MalformedBody as error:
                # FastAPI turns json.JSONDecodeError into a 400 "malformed JSON" problem.
                raise json.JSONDecodeError(str(error), raw.decode(errors="replace"), 0) from None
        return self._json


class StrictJsonRoute(APIRoute):
    """Bodies parsed once, strictly; fields the kind does not have dropped or refused as
    ``?fieldValidation=`` says (``shoal.api.unknown_fields``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            first = StrictJsonRequest(request.scope, request.receive)
            try:
                return await handler(first)
            except RequestValidationError as error:
                return await without_unknown(handler, first, error)

        return strict


async def without_unknown(
    handler: Callable[[Request], Coroutine[Any, Any, Response]],
    request: StrictJsonRequest,
    error: RequestValidationError,
) -> Response:
    """The request again, without the body's fields that its kind does not have (unless
    ``Strict``); the validation error as it was when there are none."""
    mode = unknown_fields.mode_of(request.query_params)
    for _ in unknown_fields.rounds():
        found = unknown_fields.unknown(error.errors(), ("body",))
        if mode in (None, unknown_fields.STRICT) or not found:
            raise error
        body, dropped = unknown_fields.without(door.parsed(request.scope, b""), found)
        if not dropped:
            raise error
        door.replace(request.scope, body)
        if mode == unknown_fields.WARN:
            for path in dropped:
                warn(unknown_fields.warning(path))
        again = StrictJsonRequest(request.scope, request.receive)
        again._body = await request.body()
        try:
            return await handler(again)
        except RequestValidationError as next_error:
            error, request = next_error, again
    raise error
