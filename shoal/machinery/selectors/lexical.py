"""The lexical rules of constraints and selectors: their operators, what a key, a metric
name, a value and a number may be, and how each prints in its canonical spelling.

The parser (``terms``) and every caller that checks or prints a single word share these
rules; they stand apart from the grammar so that a reader finds them in one place.
"""

from __future__ import annotations

import enum
import math
import re

from shoal.machinery.names import (
    DNS_SUBDOMAIN,
    MAX_QUALIFIED_NAME,
    OBJECT_NAME_RULE,
    QUALIFIED_NAME,
    object_name_problem,
)


class ConstraintError(ValueError):
    """A constraint or selector that cannot be parsed, with the column where it went wrong."""

    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(message)
        self.column = column


class LabelOp(enum.StrEnum):
    """Operator of a label constraint; the value is its canonical spelling."""

    EQ = "is"
    NE = "is not"
    IN = "in"
    NOT_IN = "not in"


class MetricOp(enum.StrEnum):
    """Operator of a metric constraint; the value is its canonical spelling."""

    EQ = "="
    NE = "!="
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="
    IN = "in"
    NOT_IN = "not in"


class SelectorOp(enum.StrEnum):
    """Operator of a label selector requirement; the value is its canonical spelling."""

    EQ = "="
    NE = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    NOT_EXISTS = "!"


# --------------------------------------------------------------------------- lexical rules

_NAME = QUALIFIED_NAME
_DNS_SUBDOMAIN = DNS_SUBDOMAIN
_MAX_NAME = MAX_QUALIFIED_NAME
_MAX_PREFIX = 253
_MAX_VALUE = MAX_QUALIFIED_NAME
_BARE_VALUE = QUALIFIED_NAME


def unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1], flags=re.S)


def check_key(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label key, or None when it is one."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return "the prefix before '/' is empty"
        if len(prefix) > _MAX_PREFIX or _DNS_SUBDOMAIN.fullmatch(prefix) is None:
            return (
                f"the prefix {prefix!r} must be a DNS subdomain (lowercase alphanumeric, "
                f"'-' and '.', at most {_MAX_PREFIX} characters)"
            )
    if not name:
        return "the name is empty"
    if len(name) > _MAX_NAME:
        return f"the name is longer than {_MAX_NAME} characters"
    if _NAME.fullmatch(name) is None:
        return (
            "the name must consist of alphanumeric characters, '-', '_' or '.', "
            "and start and end with an alphanumeric character"
        )
    return None


def check_metric_name(name: str) -> str | None:
    """Why ``name`` is not a metric name (a Metric's name, as Krake allows it), or None."""
    if object_name_problem(name) is not None:
        return f"a metric name {OBJECT_NAME_RULE}"
    return None


def check_value(value: str, quoted: bool = True) -> str | None:
    """Why ``value`` is not a label value, or None when it is one."""
    if len(value) > _MAX_VALUE:
        return f"a label value is at most {_MAX_VALUE} characters long"
    if not quoted and _BARE_VALUE.fullmatch(value) is None:
        return (
            "an unquoted value must consist of alphanumeric characters, '-', '_' or '.', "
            "and start and end with an alphanumeric character; quote other values"
        )
    return None


def check_number(value: float) -> str | None:
    if not math.isfinite(value):
        return "a metric value must be a finite number"
    return None


KEYWORDS = frozenset(
    {"is", "not", "in", "notin", "greater", "less", "than", "or", "equal", "gt", "gte", "lt", "lte"}
)


def format_value(value: str) -> str:
    """Spell a label value so that it parses back to itself (quoted only when needed)."""
    if _BARE_VALUE.fullmatch(value) and value.lower() not in KEYWORDS:
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_number(value: float) -> str:
    """Spell a number shortly and so that it parses back to the same float."""
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


# --------------------------------------------------------------------------- data classes
