"""Kubernetes label and field selectors, parsed once per request into plain predicates."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
LabelPredicate = Callable[[dict[str, str]], bool]


class SelectorError(ValueError):
    """A selector string that cannot be parsed."""


_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _term(term: str) -> LabelPredicate:
    m = _EQ_RE.match(term)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _SET_RE.match(term)
    if m:
        neg, key, op, values = m.groups()
        if op:
            if neg:
                raise SelectorError(f"invalid selector term {term!r}")
            vals = {v.strip() for v in values.split(",") if v.strip()}
            if op == "in":
                return lambda labels: labels.get(key) in vals
            return lambda labels: labels.get(key) not in vals
        if neg:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"invalid selector term {term!r}")


def parse_label_selector(text: str | None) -> LabelPredicate | None:
    """Parse ``a=b,c!=d,e in (f,g),h notin (i),j,!k``; None when there is nothing to match."""
    if not text or not text.strip():
        return None
    preds = [_term(t) for t in _split_terms(text)]
    return lambda labels: all(p(labels) for p in preds)


def match_label_selector(selector: Obj | None, labels: dict[str, str]) -> bool:
    """Evaluate a structured LabelSelector (matchLabels + matchExpressions)."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _field_value(obj: Obj, path: str) -> str | None:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    if cur is None:
        return ""
    return str(cur)


def parse_field_selector(text: str | None) -> Callable[[Obj], bool] | None:
    """Parse ``metadata.name=x,spec.nodeName!=`` style field selectors."""
    if not text or not text.strip():
        return None
    tests: list[tuple[str, bool, str]] = []
    for term in _split_terms(text):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise SelectorError(f"invalid field selector term {term!r}")
        path, op, value = m.groups()
        tests.append((path, op != "!=", value))

    def pred(obj: Obj) -> bool:
        for path, eq, value in tests:
            if (_field_value(obj, path) == value) != eq:
                return False
        return True

    return pred
