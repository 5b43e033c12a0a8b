"""The grammar of names: Shoal's object names, Kubernetes' DNS names and label names.

Each pattern is written once; the model, the API's fast path, the selectors and the
simulated clusters match against these, and say why in their own words.
"""

from __future__ import annotations

import re

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"

OBJECT_NAME = re.compile(r"^[a-z0-9](?:[-a-z0-9_]*[a-z0-9])?$")
"""Shoal's object and namespace names (Krake's): lower case letters, digits, '-' and '_'."""
MAX_OBJECT_NAME = 63

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
