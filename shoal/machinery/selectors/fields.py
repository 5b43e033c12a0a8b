"""Field selectors: ``status.scheduled_to.name=edge-1,status.state!=FAILED``, ``spec.nodeName=``.

As Kubernetes' ``fieldSelector``, each term names a field by its dotted path
in the object's JSON and compares it with ``=`` (or ``==``) or ``!=``; the
terms are ANDed. A missing or null field reads as the empty string, booleans
as ``true``/``false``, numbers as written; an object or a list equals no
value. Any kind, any field: the path is data, so no kind declares which of
its fields may be selected. Shoal's API and the simulated clusters both read them here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TERM = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*(==|!=|=)(.*)$")


@dataclass(frozen=True, slots=True)
class _Term:
    path: tuple[str, ...]
    equal: bool
    value: str


def _text(value: Any) -> str | None:
    """A field's value as selectors spell it; None for an object or a list."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


@dataclass(frozen=True, slots=True)
class FieldSelector:
    terms: tuple[_Term, ...]

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        terms = []
        for part in text.split(","):
            found = _TERM.match(part.strip())
            if found is None:
                raise ValueError(
                    f"{part.strip()!r} is not 'field.path=value' or 'field.path!=value'"
                )
            path, op, value = found.groups()
            terms.append(_Term(tuple(path.split(".")), op != "!=", value.strip()))
        return cls(tuple(terms))

    def paths(self) -> tuple[tuple[str, ...], ...]:
        return tuple(term.path for term in self.terms)

    def matches(self, obj: dict[str, Any]) -> bool:
        for term in self.terms:
            value: Any = obj
            for step in term.path:
                value = value.get(step) if isinstance(value, dict) else None
            if (_text(value) == term.value) != term.equal:
                return False
        return True
