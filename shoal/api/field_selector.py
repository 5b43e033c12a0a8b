"""The ``field_selector`` query parameter of lists and watches.

The API still reads every stored object of the listed prefix, but sends only the
matching ones (the grammar: ``shoal.machinery.selectors.fields``).
"""

from __future__ import annotations

from shoal.machinery.problems import ProblemError
from shoal.machinery.selectors.fields import FieldSelector


def parse_field_selector(text: str | None) -> FieldSelector | None:
    """The ``field_selector`` query parameter, or a 400 problem naming it."""
    try:
        return FieldSelector.parse(text) if text else None
    except ValueError as error:
        why = {"field": "field_selector", "reason": str(error)}
        raise ProblemError(400, f"field_selector: {error}", errors=[why]) from None
