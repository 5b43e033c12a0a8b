"""The grammar of names: Shoal's object names, Kubernetes' DNS names and label names.

Each pattern is written once; the model, the API's fast path, the selectors and the
simulated clusters match against these, and say why in their own words. Where a
Shoal name must become a Kubernetes name or label value on a member cluster, the
mapping is here too (``kube_label_value``, ``kube_name``).
"""

from __future__ import annotations

import hashlib
import re

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"

_WORD = "A-Za-z0-9_"
OBJECT_NAME = re.compile(rf"^[{_WORD}](?:[-{_WORD}.:]{{0,253}}[{_WORD}])?$")
"""Shoal's object and namespace names, as Krake allows them: 1 to 255 ASCII letters,
digits, '_', '-', '.' or ':', starting and ending with a letter, digit or '_'
(``system:admin``, ``GlobalInfrastructureProvider_instance``). Written without ``\\w``
so that pydantic's (Unicode) regular expressions read it as Python does."""
MAX_OBJECT_NAME = 255
OBJECT_NAME_RULE = (
    "must be 1 to 255 letters, digits, '_', '-', '.' or ':', "
    "starting and ending with a letter, digit or '_'"
)

DNS_LABEL = re.compile(rf"^{_LABEL}$")
"""RFC 1123 label: a Kubernetes namespace, a Service's name."""
DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
"""RFC 1123 subdomain: most Kubernetes object names, a label key's prefix."""
CRD_NAME = rf"^{_LABEL}(?:\.{_LABEL})+$"
"""``<plural>.<group>`` of a custom resource definition (a pydantic ``pattern``)."""
KUBERNETES_NAME = re.compile(r"^[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?$")
"""What the simulated clusters accept as an object name (a loose subdomain)."""

QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$")
"""The name part of a label key, a label value, a metric name."""
MAX_QUALIFIED_NAME = 63


def is_kube_namespace(value: str) -> bool:
    """``value`` can name a Kubernetes namespace: a DNS-1123 label of at most 63."""
    return len(value) <= 63 and DNS_LABEL.fullmatch(value) is not None


def object_name_problem(value: str) -> str | None:
    """Why ``value`` is not a Shoal object or namespace name, or None."""
    if OBJECT_NAME.fullmatch(value) is None:  # fullmatch: a trailing newline is no name
        return OBJECT_NAME_RULE
    return None


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:10]


def kube_label_value(value: str) -> str:
    """``value`` as a label value on a member cluster: itself when it is one, else a
    readable form (':' and other marks as '-', cut short) with a digest of the whole.

    Two names never share a mapped form by chance (``system:admin`` and
    ``system-admin`` differ); an exact name is kept in an annotation beside it.
    """
    if len(value) <= MAX_QUALIFIED_NAME and QUALIFIED_NAME.fullmatch(value):
        return value
    readable = re.sub(r"[^-A-Za-z0-9_.]", "-", value)[:50].strip("-_.") or "x"
    return f"{readable}-{_digest(value)}"


def kube_name(value: str, limit: int = 63, *, dots: bool = False) -> str:
    """``value`` as (part of) a Kubernetes name of at most ``limit`` characters: a
    DNS-1123 label's characters (with ``dots``, a subdomain's): itself when it is one,
    else lower case with other marks as '-' and a digest of the whole."""
    rule = DNS_SUBDOMAIN if dots else DNS_LABEL
    if len(value) <= limit and rule.fullmatch(value):
        return value
    readable = re.sub(r"[^-a-z0-9]", "-", value.lower())[: max(limit - 11, 1)].strip("-") or "x"
    return f"{readable}-{_digest(value)}"
