"""Fields a body sends that its kind does not have: dropped with a warning, or refused.

As Kubernetes' ``fieldValidation`` query parameter: ``Warn`` (the default) drops each
unknown field and names it in a ``Warning`` header (``299 - "unknown field
\\"spec.foo\\""``); ``Ignore`` drops them silently; ``Strict`` refuses the body with a
422 naming each. Krake's API drops them too (its schemas' ``unknown = EXCLUDE``), so a
Krake client that sends a field Krake ignores (``rok infra cloud update --password``
puts one in ``metadata``) works unchanged. Shoal's own CLI and client send ``Strict``.

Only a field the schema does not have is unknown (pydantic's ``extra_forbidden``): a
field the schema has but the writer may not set (a controller's status field, a
server-set one) is refused or kept as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from fastapi import Query

from shoal.machinery.paths import join

PARAM = "fieldValidation"
STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
MODES = (STRICT, WARN, IGNORE)
_MAX_ROUNDS = 4  # a field inside a union shows once each round


def mode_of(query: Mapping[str, Any]) -> str | None:
    """The request's mode (``Warn`` when not given); None for a value that is no mode."""
    value = query.get(PARAM)
    if value is None:
        return WARN
    return value if value in MODES else None


def parameter() -> inspect.Parameter:
    """``?fieldValidation=`` as a documented query parameter of every write."""
    return inspect.Parameter(
        "field_validation",
        inspect.Parameter.KEYWORD_ONLY,
        annotation=str | None,
        default=Query(
            None,
            alias=PARAM,
            pattern="^(Strict|Warn|Ignore)$",
            description="Fields the kind does not have: Warn (default) drops them and names "
            "each in a Warning header, Ignore drops them, Strict refuses the body (422).",
        ),
    )


def unknown(errors: Iterable[Mapping[str, Any]], prefix: tuple[Any, ...] = ()) -> list[tuple]:
    """The locations (below ``prefix``) of the fields the schema does not have."""
    found = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if error.get("type") == "extra_forbidden" and loc[: len(prefix)] == prefix:
            found.append(loc[len(prefix) :])
    return found


def without(body: Any, locations: list[tuple]) -> tuple[Any, list[str]]:
    """A copy of ``body`` without the fields at ``locations``, and their paths.

    A location may hold steps that are no key of the body (pydantic names the member of
    a union it tried): those are skipped.
    """
    body = orjson.loads(orjson.dumps(body))
    dropped: list[str] = []
    for loc in locations:
        here, path = body, ""
        for step in loc[:-1]:
            if isinstance(here, dict) and isinstance(step, str) and step in here:
                here, path = here[step], join(path, step)
            elif isinstance(here, list) and isinstance(step, int) and 0 <= step < len(here):
                here, path = here[step], join(path, step)
        last = loc[-1] if loc else None
        if isinstance(here, dict) and isinstance(last, str) and last in here:
            del here[last]
            name = join(path, last)
            if name not in dropped:
                dropped.append(name)
    return body, dropped


def warning(path: str) -> str:
    """The warning of one dropped field, in Kubernetes' words."""
    return f'unknown field "{path}"'


def rounds() -> range:
    """How many times a body is read again after dropping fields."""
    return range(_MAX_ROUNDS)
