"""What constraints and selectors are: their operators, lexical rules and data classes.

The languages themselves (grammar, parser, canonical fast paths) are in
``grammar``; see the package for the syntax.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from shoal.machinery.names import DNS_SUBDOMAIN, MAX_QUALIFIED_NAME, QUALIFIED_NAME


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


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1], flags=re.S)


def _check_key(key: str) -> str | None:
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


def _check_metric_name(name: str) -> str | None:
    """Why ``name`` is not a metric name, or None when it is one."""
    if _NAME.fullmatch(name) is None:
        return (
            "a metric name must consist of alphanumeric characters, '-', '_' or '.', "
            "and start and end with an alphanumeric character"
        )
    return None


def _check_value(value: str, quoted: bool = True) -> str | None:
    """Why ``value`` is not a label value, or None when it is one."""
    if len(value) > _MAX_VALUE:
        return f"a label value is at most {_MAX_VALUE} characters long"
    if not quoted and _BARE_VALUE.fullmatch(value) is None:
        return (
            "an unquoted value must consist of alphanumeric characters, '-', '_' or '.', "
            "and start and end with an alphanumeric character; quote other values"
        )
    return None


def _check_number(value: float) -> str | None:
    if not math.isfinite(value):
        return "a metric value must be a finite number"
    return None


_KEYWORDS = frozenset(
    {"is", "not", "in", "notin", "greater", "less", "than", "or", "equal", "gt", "gte", "lt", "lte"}
)


def format_value(value: str) -> str:
    """Spell a label value so that it parses back to itself (quoted only when needed)."""
    if _BARE_VALUE.fullmatch(value) and value.lower() not in _KEYWORDS:
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_number(value: float) -> str:
    """Spell a number shortly and so that it parses back to the same float."""
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


# --------------------------------------------------------------------------- data classes


@dataclass(frozen=True, slots=True)
class LabelConstraint:
    """A condition on the value of one label of a cluster (or cloud)."""

    key: str
    op: LabelOp
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", LabelOp(self.op))
        object.__setattr__(self, "values", tuple(self.values))
        if (reason := _check_key(self.key)) is not None:
            raise ConstraintError(f"invalid label key {self.key!r}: {reason}")
        _check_arity(self.op in (LabelOp.EQ, LabelOp.NE), len(self.values))
        for value in self.values:
            if (reason := _check_value(value)) is not None:
                raise ConstraintError(f"invalid label value {value!r}: {reason}")

    @classmethod
    def parse(cls, text: str) -> LabelConstraint:
        """Parse ``text``; raise :class:`ConstraintError` saying what is wrong and where."""
        from shoal.machinery.selectors import grammar  # the grammar builds these classes

        _check_text(text, "label_constraint")
        return grammar._parse_label(text)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy the constraint; a missing label satisfies nothing."""
        value = labels.get(self.key)
        if value is None:
            return False
        if self.op is LabelOp.EQ:
            return value == self.values[0]
        if self.op is LabelOp.NE:
            return value != self.values[0]
        if self.op is LabelOp.IN:
            return value in self.values
        return value not in self.values

    def __str__(self) -> str:
        if self.op in (LabelOp.EQ, LabelOp.NE):
            return f"{self.key} {self.op.value} {format_value(self.values[0])}"
        listed = ", ".join(format_value(value) for value in self.values)
        return f"{self.key} {self.op.value} ({listed})"


@dataclass(frozen=True, slots=True)
class MetricConstraint:
    """A condition on the value of one metric of a cluster (or cloud)."""

    metric: str
    op: MetricOp
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", MetricOp(self.op))
        object.__setattr__(self, "values", tuple(float(value) for value in self.values))
        if (reason := _check_metric_name(self.metric)) is not None:
            raise ConstraintError(f"invalid metric name {self.metric!r}: {reason}")
        _check_arity(self.op not in (MetricOp.IN, MetricOp.NOT_IN), len(self.values))
        for value in self.values:
            if (reason := _check_number(value)) is not None:
                raise ConstraintError(f"invalid metric value {value!r}: {reason}")

    @classmethod
    def parse(cls, text: str) -> MetricConstraint:
        """Parse ``text``; raise :class:`ConstraintError` saying what is wrong and where."""
        from shoal.machinery.selectors import grammar  # the grammar builds these classes

        _check_text(text, "metric_constraint")
        return grammar._parse_metric(text)

    def matches(self, value: float | None) -> bool:
        """Whether the metric ``value`` satisfies the constraint; missing (or NaN) fails."""
        if value is None or math.isnan(value):
            return False
        op = self.op
        if op is MetricOp.EQ:
            return value == self.values[0]
        if op is MetricOp.NE:
            return value != self.values[0]
        if op is MetricOp.GT:
            return value > self.values[0]
        if op is MetricOp.GE:
            return value >= self.values[0]
        if op is MetricOp.LT:
            return value < self.values[0]
        if op is MetricOp.LE:
            return value <= self.values[0]
        if op is MetricOp.IN:
            return value in self.values
        return value not in self.values

    def __str__(self) -> str:
        if self.op in (MetricOp.IN, MetricOp.NOT_IN):
            listed = ", ".join(format_number(value) for value in self.values)
            return f"{self.metric} {self.op.value} ({listed})"
        return f"{self.metric} {self.op.value} {format_number(self.values[0])}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One comma-separated term of a :class:`LabelSelector`."""

    key: str
    op: SelectorOp
    values: tuple[str, ...] = ()

    _SINGLE: ClassVar[frozenset[SelectorOp]] = frozenset({SelectorOp.EQ, SelectorOp.NE})
    _NONE: ClassVar[frozenset[SelectorOp]] = frozenset({SelectorOp.EXISTS, SelectorOp.NOT_EXISTS})

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", SelectorOp(self.op))
        object.__setattr__(self, "values", tuple(self.values))
        if (reason := _check_key(self.key)) is not None:
            raise ConstraintError(f"invalid label key {self.key!r}: {reason}")
        if self.op in self._NONE:
            if self.values:
                raise ConstraintError(f"operator {self.op.value!r} takes no values")
        else:
            _check_arity(self.op in self._SINGLE, len(self.values))
        for value in self.values:
            if (reason := _check_value(value)) is not None:
                raise ConstraintError(f"invalid label value {value!r}: {reason}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes semantics: ``!=``, ``notin`` and ``!k`` match a missing label."""
        value = labels.get(self.key)
        op = self.op
        if op is SelectorOp.EXISTS:
            return value is not None
        if op is SelectorOp.NOT_EXISTS:
            return value is None
        if op is SelectorOp.EQ:
            return value == self.values[0]
        if op is SelectorOp.NE:
            return value != self.values[0]
        if op is SelectorOp.IN:
            return value in self.values
        return value not in self.values

    def __str__(self) -> str:
        op = self.op
        if op is SelectorOp.EXISTS:
            return self.key
        if op is SelectorOp.NOT_EXISTS:
            return f"!{self.key}"
        if op in self._SINGLE:
            return f"{self.key}{op.value}{format_value(self.values[0])}"
        return f"{self.key} {op.value} ({','.join(format_value(v) for v in self.values)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Kubernetes-style label selector; an object matches when all requirements match."""

    requirements: tuple[Requirement, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "requirements", tuple(self.requirements))

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse ``text`` (empty or blank selects everything)."""
        from shoal.machinery.selectors import grammar  # the grammar builds these classes

        _check_text(text, "selector")
        return grammar._parse_selector(text)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def _check_arity(single: bool, count: int) -> None:
    if single and count != 1:
        raise ConstraintError(f"operator takes exactly one value, got {count}")
    if not single and count == 0:
        raise ConstraintError("operator takes a non-empty list of values")


_WHAT = {
    "label_constraint": "label constraint",
    "metric_constraint": "metric constraint",
    "selector": "label selector",
}


def _check_text(text: object, start: str) -> None:
    if not isinstance(text, str):
        raise ConstraintError(f"a {_WHAT[start]} must be a string, not {type(text).__name__}")
