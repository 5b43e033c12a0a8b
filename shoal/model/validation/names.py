"""Kubernetes' syntax for names, label keys and values, and identifiers free of control bytes."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from shoal.machinery.names import DNS_LABEL, DNS_SUBDOMAIN
from shoal.machinery.paths import join
from shoal.model.base import check_label_key, check_label_value
from shoal.model.validation.findings import Finding, type_name

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def control_character(value: str) -> str | None:
    """Why ``value`` cannot be an identifier (it holds NUL or another control byte), or None."""
    found = _CONTROL.search(value)
    if found is None:
        return None
    return f"must not contain control characters (found {found.group()!r})"


def identifier(value: Any, path: str, what: str = "a name") -> Iterator[Finding]:
    """A reference by name (a metric, a provider, a cluster): non-empty, no control bytes."""
    if not isinstance(value, str):
        yield Finding(path, f"must be {what} (a string), not {type_name(value)}")
    elif not value.strip():
        yield Finding(path, f"must be {what}, not an empty string")
    elif (reason := control_character(value)) is not None:
        yield Finding(path, reason)


def dns_label(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 label (≤ 63 of a-z, 0-9, '-'), or None."""
    return _dns(value, DNS_LABEL, 63, "label", "'-'")


def dns_subdomain(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 subdomain (≤ 253, dot-separated labels), or None."""
    return _dns(value, DNS_SUBDOMAIN, 253, "subdomain", "'-' or '.'")


def _dns(value: str, pattern: re.Pattern[str], limit: int, what: str, marks: str) -> str | None:
    if len(value) <= limit and pattern.match(value):
        return None
    return (
        f"must be a DNS-1123 {what}: at most {limit} lower case letters, digits or {marks}, "
        "starting and ending with a letter or digit"
    )


def labels(value: Any, path: str) -> Iterator[Finding]:
    """A label map as Kubernetes takes it: ``[prefix/]name`` keys, short plain values."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        yield Finding(path, f"must be an object of labels, not {type_name(value)}")
        return
    for key, val in value.items():
        where = join(path, str(key))
        try:
            check_label_key(str(key))
        except ValueError as error:
            yield Finding(where, str(error))
        if not isinstance(val, str):
            yield Finding(where, f"label value must be a string, not {type_name(val)}")
            continue
        try:
            check_label_value(val)
        except ValueError as error:
            yield Finding(where, str(error))
