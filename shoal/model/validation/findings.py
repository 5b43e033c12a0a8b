"""One thing wrong with a body: where (a field path) and why; warnings do not refuse."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Finding:
    field: str
    reason: str
    warning: bool = False

    def as_error(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason}


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
