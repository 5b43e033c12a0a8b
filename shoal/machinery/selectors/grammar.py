"""The grammar of constraints and selectors, its parser, and canonical fast paths.

Three small languages share one LALR grammar (built once at import) because the
scheduler parses constraints on its hot path; canonical spellings skip lark.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from shoal.machinery.selectors.terms import (
    _KEYWORDS,
    _WHAT,
    ConstraintError,
    LabelConstraint,
    LabelOp,
    LabelSelector,
    MetricConstraint,
    MetricOp,
    Requirement,
    SelectorOp,
    _check_key,
    _check_metric_name,
    _check_number,
    _check_value,
    _unquote,
)

P = TypeVar("P")

# A keyword only counts as one when no name character follows ("notable" is a value).
_KW = r"(?![-A-Za-z0-9_.])"

_GRAMMAR = rf"""
// ---- label constraints
label_constraint: KEY _label_eq value               -> label_eq
                | KEY _label_ne value               -> label_ne
                | KEY _IN value_list                -> label_in
                | KEY _NOT_IN value_list            -> label_not_in

// ---- metric constraints
metric_constraint: NAME _metric_eq number           -> metric_eq
                 | NAME _metric_ne number           -> metric_ne
                 | NAME (_W_GT | _GT) number        -> metric_gt
                 | NAME (_W_GE | _GE | _GE2) number -> metric_ge
                 | NAME (_W_LT | _LT) number        -> metric_lt
                 | NAME (_W_LE | _LE | _LE2) number -> metric_le
                 | NAME _IN number_list             -> metric_in
                 | NAME _NOT_IN number_list         -> metric_not_in

// ---- label selectors
selector: [requirement (_COMMA requirement)*]
requirement: KEY                                    -> sel_exists
           | _BANG KEY                              -> sel_not_exists
           | KEY (_EQ | _EQEQ) [value]              -> sel_eq
           | KEY _NE [value]                        -> sel_ne
           | KEY _IN value_list                     -> sel_in
           | KEY (_NOTIN | _NOT_IN) value_list      -> sel_not_in

// ---- shared pieces
// Separate rules per language: shared ones would merge LALR states, and the contextual
// lexer of a merged state would accept both a label value and a number there.
_label_eq: _IS | _EQ | _EQEQ
_label_ne: _IS_NOT | _NE
_metric_eq: _IS | _EQ | _EQEQ
_metric_ne: _IS_NOT | _NE
value_list: _LPAR value (_COMMA value)* [_COMMA] _RPAR
number_list: _LPAR number (_COMMA number)* [_COMMA] _RPAR
value: BARE | STRING
number: NUMBER

// Multi-word operators are single terminals (fewer tokens, faster); the longer
// spelling gets the higher priority because the lexer takes the first match.
_IS.2: /is{_KW}/i
_IS_NOT.3: /is\s+not{_KW}/i
_IN.2: /in{_KW}/i
_NOT_IN.3: /not\s+in{_KW}/i
_NOTIN.2: /notin{_KW}/i
_W_GT.2: /(?:gt|greater\s+than){_KW}/i
_W_GE.3: /(?:gte|greater\s+than\s+or\s+equal){_KW}/i
_W_LT.2: /(?:lt|less\s+than){_KW}/i
_W_LE.3: /(?:lte|less\s+than\s+or\s+equal){_KW}/i
_EQ: "="
_EQEQ: "=="
_NE: "!="
_GT: ">"
_GE: ">="
_GE2: "=>"
_LT: "<"
_LE: "<="
_LE2: "=<"
_BANG: "!"
_LPAR: "("
_RPAR: ")"
_COMMA: ","

// Keys, names and values are lexed liberally and validated afterwards, for better messages.
KEY: /[A-Za-z0-9_.\-\/]+/
NAME: /[A-Za-z0-9_.\-]+/
BARE: /[A-Za-z0-9_.\-]+/
STRING: /"(?:[^"\\]|\\.)*"/s | /'(?:[^'\\]|\\.)*'/s
NUMBER: /[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?{_KW}/

%ignore /\s+/
"""

# How terminals are named in error messages, in the order they are listed.
_DISPLAY: dict[str, str] = {
    "_IS": "is",
    "_EQ": "=",
    "_EQEQ": "==",
    "_IS_NOT": "is not",
    "_NE": "!=",
    "_IN": "in",
    "_NOT_IN": "not in",
    "_NOTIN": "notin",
    "_W_GT": "greater than, gt",
    "_GT": ">",
    "_W_GE": "greater than or equal, gte",
    "_GE": ">=",
    "_GE2": "=>",
    "_W_LT": "less than, lt",
    "_LT": "<",
    "_W_LE": "less than or equal, lte",
    "_LE": "<=",
    "_LE2": "=<",
    "_BANG": "!",
    "_LPAR": "'('",
    "_RPAR": "')'",
    "_COMMA": "','",
    "KEY": "a label key",
    "NAME": "a metric name",
    "BARE": "a value",
    "STRING": "a value",
    "NUMBER": "a number",
    "$END": "end of input",
}
_DISPLAY_ORDER = {name: index for index, name in enumerate(_DISPLAY)}

_WORD = re.compile(r"""[-A-Za-z0-9_./]+|"[^"]*"?|'[^']*'?|\S""")


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
            text = _unquote(str(token))
            reason = _check_value(text)
        else:
            text = str(token)
            reason = _check_value(text, quoted=False)
        if reason is not None:
            raise _error_at(token, "label value", reason)
        return text

    def number(self, children: list[Token]) -> float:
        (token,) = children
        number = float(token)
        if (reason := _check_number(number)) is not None:
            raise _error_at(token, "metric value", reason)
        return number

    def value_list(self, children: list[str | None]) -> tuple[str, ...]:
        return tuple(child for child in children if child is not None)

    def number_list(self, children: list[float | None]) -> tuple[float, ...]:
        return tuple(child for child in children if child is not None)

    @staticmethod
    def _key(token: Token) -> str:
        if (reason := _check_key(str(token))) is not None:
            raise _error_at(token, "label key", reason)
        return str(token)

    @staticmethod
    def _metric(token: Token) -> str:
        if (reason := _check_metric_name(str(token))) is not None:
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
    _GRAMMAR,
    parser="lalr",
    lexer="contextual",
    start=["label_constraint", "metric_constraint", "selector"],
    transformer=_Build(),
    maybe_placeholders=True,
    propagate_positions=False,
)


def _describe_expected(names: Iterable[str]) -> str:
    shown: list[str] = []
    for name in sorted(names, key=lambda n: (_DISPLAY_ORDER.get(n, len(_DISPLAY)), n)):
        label = _DISPLAY.get(name, name)
        if label not in shown:
            shown.append(label)
    if not shown:
        return ""
    if len(shown) == 1:
        return f": expected {shown[0]}"
    return f": expected one of {', '.join(shown)}"


def _syntax_error(text: str, error: UnexpectedInput, start: str) -> ConstraintError:
    what = _WHAT[start]
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
        found = _WORD.match(text, position)
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
    if any(value.lower() in _KEYWORDS for value in values):
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
