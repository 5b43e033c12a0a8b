"""One thing wrong with a body: where (a field path) and why; warnings do not refuse."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Finding:
    field: str
    reason: str
    warning: bool = False

    def as_error(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason}


def join(base: str, *parts: str | int) -> str:
    """``join("spec.manifest", 0, "spec")`` → ``spec.manifest[0].spec``."""
    path = base
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif path:
            path += f".{part}"
        else:
            path = part
    return path


def field_path(loc: Iterable[Any]) -> str:
    """A pydantic error location as a field path (``spec.manifest[0].kind``).

    ``body`` (FastAPI's) and pydantic's markers such as ``function-after[...]`` are dropped.
    """
    path = ""
    for part in loc:
        if part == "body" or str(part).startswith(("function-", "union[", "json-or-python")):
            continue
        path = join(path, part) if isinstance(part, int) or path else str(part)
    return path or "body"


def type_name(value: object) -> str:
    """The JSON name of a value's type, as error messages say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
