"""Constraints and selectors: their data classes, and the parser that builds them.

Three small languages share one LALR grammar (``grammar``, built once at import) because
the scheduler parses constraints on its hot path; canonical spellings skip lark. The
operators and the rules of each word are ``lexical``'s. The classes and the parser live
in one module: each class parses, and the parser builds each class. See the package for
the syntax.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, TypeVar

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from shoal.machinery.selectors.grammar import DISPLAY, DISPLAY_ORDER, GRAMMAR, WORD
from shoal.machinery.selectors.lexical import (
    KEYWORDS,
    ConstraintError,
    LabelOp,
    MetricOp,
    SelectorOp,
    check_key,
    check_metric_name,
    check_number,
    check_value,
    format_number,
    format_value,
    unquote,
)


@dataclass(frozen=True, slots=True)
class LabelConstraint:
    """A condition on the value of one label of a cluster (or cloud)."""

    key: str
    op: LabelOp
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", LabelOp(self.op))
        object.__setattr__(self, "values", tuple(self.values))
        if (reason := check_key(self.key)) is not None:
            raise ConstraintError(f"invalid label key {self.key!r}: {reason}")
        _check_arity(self.op in (LabelOp.EQ, LabelOp.NE), len(self.values))
        for value in self.values:
            if (reason := check_value(value)) is not None:
                raise ConstraintError(f"invalid label value {value!r}: {reason}")

    @classmethod
    def parse(cls, text: str) -> LabelConstraint:
        """Parse ``text``; raise :class:`ConstraintError` saying what is wrong and where."""
        _check_text(text, "label_constraint")
        return _parse_label(text)

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
        if (reason := check_metric_name(self.metric)) is not None:
            raise ConstraintError(f"invalid metric name {self.metric!r}: {reason}")
        _check_arity(self.op not in (MetricOp.IN, MetricOp.NOT_IN), len(self.values))
        for value in self.values:
            if (reason := check_number(value)) is not None:
                raise ConstraintError(f"invalid metric value {value!r}: {reason}")

    @classmethod
    def parse(cls, text: str) -> MetricConstraint:
        """Parse ``text``; raise :class:`ConstraintError` saying what is wrong and where."""
        _check_text(text, "metric_constraint")
        return _parse_metric(text)

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
        if (reason := check_key(self.key)) is not None:
            raise ConstraintError(f"invalid label key {self.key!r}: {reason}")
        if self.op in self._NONE:
            if self.values:
                raise ConstraintError(f"operator {self.op.value!r} takes no values")
        else:
            _check_arity(self.op in self._SINGLE, len(self.values))
        for value in self.values:
            if (reason := check_value(value)) is not None:
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
        _check_text(text, "selector")
        return _parse_selector(text)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def _check_arity(single: bool, count: int) -> None:
    if single and count != 1:
        raise ConstraintError(f"operator takes exactly one value, got {count}")
    if not single and count == 0:
        raise ConstraintError("operator takes a non-empty list of values")


WHAT = {
    "label_constraint": "label constraint",
    "metric_constraint": "metric constraint",
    "selector": "label selector",
}


def _check_text(text: object, start: str) -> None:
    if not isinstance(text, str):
        raise ConstraintError(f"a {WHAT[start]} must be a string, not {type(text).__name__}")


# --------------------------------------------------------------------------- the grammar

P = TypeVar("P")


# --------------------------------------------------------------------------- parsing


def _error_at(token: Token, what: str, reason: str) -> ConstraintError:
    column = (token.start_pos or 0) + 1
    return ConstraintError(f"invalid {what} {str(token)!r} at column {column}: {reason}", column)


class _Build(Transformer[Token, Any]):
    """Turns parse-tree callbacks straight into data classes (used inline by the LALR parser)."""

    # -- pieces
    def value(self, children: list[Token]) -> str:
        (token,) = children
        if token.type == "STRING":
            text = unquote(str(token))
            reason = check_value(text)
        else:
            text = str(token)
            reason = check_value(text, quoted=False)
        if reason is not None:
            raise _error_at(token, "label value", reason)
        return text

    def number(self, children: list[Token]) -> float:
        (token,) = children
        number = float(token)
        if (reason := check_number(number)) is not None:
            raise _error_at(token, "metric value", reason)
        return number

    def value_list(self, children: list[str | None]) -> tuple[str, ...]:
        return tuple(child for child in children if child is not None)

    def number_list(self, children: list[float | None]) -> tuple[float, ...]:
        return tuple(child for child in children if child is not None)

    @staticmethod
    def _key(token: Token) -> str:
        if (reason := check_key(str(token))) is not None:
            raise _error_at(token, "label key", reason)
        return str(token)

    @staticmethod
    def _metric(token: Token) -> str:
        if (reason := check_metric_name(str(token))) is not None:
            raise _error_at(token, "metric name", reason)
        return str(token)

    # -- constraints and selector requirements: one callback per rule, from _RULES below
    def _label(self, children: list[Any], op: LabelOp) -> LabelConstraint:
        key, values = children
        if isinstance(values, str):
            values = (values,)
        return LabelConstraint(self._key(key), op, values)

    def _metric_c(self, children: list[Any], op: MetricOp) -> MetricConstraint:
        name, values = children
        if isinstance(values, float):
            values = (values,)
        return MetricConstraint(self._metric(name), op, values)

    def _requirement(self, children: list[Any], op: SelectorOp) -> Requirement:
        key, *rest = children
        values = rest[0] if rest else ()
        if not isinstance(values, tuple):
            values = ("" if values is None else values,)
        return Requirement(self._key(key), op, values)

    def selector(self, children: list[Requirement | None]) -> LabelSelector:
        return LabelSelector(tuple(child for child in children if child is not None))


_RULES: dict[str, tuple[str, enum.StrEnum]] = {
    **{f"label_{op.name.lower()}": ("_label", op) for op in LabelOp},
    **{f"metric_{op.name.lower()}": ("_metric_c", op) for op in MetricOp},
    **{f"sel_{op.name.lower()}": ("_requirement", op) for op in SelectorOp},
}
"""Grammar rule → (builder method, operator): the LALR parser calls one callback per rule."""


def _callback(builder: str, op: enum.StrEnum) -> Callable[[_Build, list[Any]], Any]:
    def build(self: _Build, children: list[Any]) -> Any:
        return getattr(self, builder)(children, op)

    return build


for _rule, (_builder, _op) in _RULES.items():
    setattr(_Build, _rule, _callback(_builder, _op))


_PARSER = Lark(
    GRAMMAR,
    parser="lalr",
    lexer="contextual",
    start=["label_constraint", "metric_constraint", "selector"],
    transformer=_Build(),
    maybe_placeholders=True,
    propagate_positions=False,
)


def _describe_expected(names: Iterable[str]) -> str:
    shown: list[str] = []
    for name in sorted(names, key=lambda n: (DISPLAY_ORDER.get(n, len(DISPLAY)), n)):
        label = DISPLAY.get(name, name)
        if label not in shown:
            shown.append(label)
    if not shown:
        return ""
    if len(shown) == 1:
        return f": expected {shown[0]}"
    return f": expected one of {', '.join(shown)}"


def _syntax_error(text: str, error: UnexpectedInput, start: str) -> ConstraintError:
    what = WHAT[start]
    if isinstance(error, UnexpectedToken):
        expected: Iterable[str] = error.accepts or error.expected
        if error.token.type == "$END":
            column = len(text.rstrip()) + 1
            message = f"unexpected end of {what} at column {column}"
            if not text.strip():
                message = f"empty {what}"
            return ConstraintError(message + _describe_expected(expected), column)
        column = (error.token.start_pos or 0) + 1
        word = str(error.token)
    elif isinstance(error, UnexpectedCharacters):
        expected = error.allowed or ()
        position = error.pos_in_stream or 0
        column = position + 1
        found = WORD.match(text, position)
        word = found.group() if found else text[position:]
    else:  # pragma: no cover - LALR raises only the two above
        column = getattr(error, "column", 0)
        return ConstraintError(f"invalid {what} at column {column}", column)
    message = f"unexpected {word!r} at column {column}"
    return ConstraintError(message + _describe_expected(expected), column)


def _run(text: str, start: str) -> Any:
    try:
        return _PARSER.parse(text, start=start)
    except UnexpectedInput as error:
        raise _syntax_error(text, error, start) from None


# Canonical spellings (what ``str()`` prints, and so what the API stores) skip lark:
# the scheduler re-parses them on its hot path. Anything these strict patterns do
# not recognise, or that fails validation, goes through the grammar, which stays
# the definition of the language (tests check both paths agree).
_C_KEY = r"(?:[a-z0-9][-a-z0-9.]*/)?[A-Za-z0-9][-A-Za-z0-9_.]*"
_C_VALUE = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_C_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?:e[-+][0-9]+)?"
_CANONICAL_LABEL = re.compile(rf"({_C_KEY}) (is not|is) ({_C_VALUE})")
_CANONICAL_LABELS = re.compile(rf"({_C_KEY}) (in|not in) \(({_C_VALUE}(?:, {_C_VALUE})*)\)")
_CANONICAL_METRIC = re.compile(rf"({_C_VALUE}) (=|!=|>=|>|<=|<) ({_C_NUMBER})")
_CANONICAL_METRICS = re.compile(rf"({_C_VALUE}) (in|not in) \(({_C_NUMBER}(?:, {_C_NUMBER})*)\)")


def _canonical_label(text: str) -> LabelConstraint | None:
    found = _CANONICAL_LABEL.fullmatch(text) or _CANONICAL_LABELS.fullmatch(text)
    if found is None:
        return None
    key, op, listed = found.groups()
    values = tuple(listed.split(", "))
    if any(value.lower() in KEYWORDS for value in values):
        return None
    try:
        return LabelConstraint(key, LabelOp(op), values)
    except ConstraintError:
        return None


def _canonical_metric(text: str) -> MetricConstraint | None:
    found = _CANONICAL_METRIC.fullmatch(text) or _CANONICAL_METRICS.fullmatch(text)
    if found is None:
        return None
    name, op, listed = found.groups()
    try:
        return MetricConstraint(name, MetricOp(op), tuple(map(float, listed.split(", "))))
    except ConstraintError:
        return None


@lru_cache(maxsize=32768)
def _parse_label(text: str) -> LabelConstraint:
    if (fast := _canonical_label(text)) is not None:
        return fast
    result: LabelConstraint = _run(text, "label_constraint")
    return result


@lru_cache(maxsize=32768)
def _parse_metric(text: str) -> MetricConstraint:
    if (fast := _canonical_metric(text)) is not None:
        return fast
    result: MetricConstraint = _run(text, "metric_constraint")
    return result


@lru_cache(maxsize=1024)
def _parse_selector(text: str) -> LabelSelector:
    result: LabelSelector = _run(text, "selector")
    return result


def parse_label_constraints(texts: Sequence[str]) -> list[LabelConstraint]:
    """Parse a list of label constraints; the error names the index of the bad one."""
    return _parse_each(texts, LabelConstraint.parse, "label constraint")


def parse_metric_constraints(texts: Sequence[str]) -> list[MetricConstraint]:
    """Parse a list of metric constraints; the error names the index of the bad one."""
    return _parse_each(texts, MetricConstraint.parse, "metric constraint")


def _parse_each(texts: Sequence[str], parse: Callable[[str], P], what: str) -> list[P]:
    parsed: list[P] = []
    for index, text in enumerate(texts):
        try:
            parsed.append(parse(text))
        except ConstraintError as error:
            raise ConstraintError(f"{what} [{index}] {text!r}: {error}", error.column) from None
    return parsed
