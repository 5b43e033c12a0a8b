"""Label and metric constraints, and Kubernetes-style label selectors.

Three small languages share one LALR grammar (built once at import) because the
scheduler parses constraints on its hot path. Every parsed object prints in a
canonical spelling that parses back to an equal object, so the API can store the
canonical text and the scheduler can re-parse it cheaply (``parse`` is cached).

Label constraints (the value of a cluster's label)::

    location is DE          location = DE          location == DE
    location is not DE      location != DE
    location in (DE, FR)    location not in (DE, FR)

Metric constraints (the value of a metric, a number)::

    load is 5 | load = 5 | load == 5          load is not 5 | load != 5
    load greater than 5 | load gt 5 | load > 5
    load greater than or equal 5 | load gte 5 | load >= 5 | load => 5
    load less than 5 | load lt 5 | load < 5
    load less than or equal 5 | load lte 5 | load <= 5 | load =< 5
    load in (1, 2) | load not in (1, 2)

Label selectors (list APIs)::

    k=v,k2!=v2,k3 in (a,b),k4 notin (c),k5,!k6

Keywords are case-insensitive. Label values may be quoted ('a b' or "a b",
backslash escapes the next character); the canonical spelling quotes only values
that need it. A missing label or metric matches no constraint, not even a
negative one; selectors follow Kubernetes instead (``!=``, ``notin`` and ``!k``
match objects lacking the label).
"""

from shoal.machinery.selectors.terms import (
    ConstraintError,
    LabelConstraint,
    LabelOp,
    LabelSelector,
    MetricConstraint,
    MetricOp,
    Requirement,
    SelectorOp,
    format_number,
    format_value,
    parse_label_constraints,
    parse_metric_constraints,
)

__all__ = [
    "ConstraintError",
    "LabelConstraint",
    "LabelOp",
    "LabelSelector",
    "MetricConstraint",
    "MetricOp",
    "Requirement",
    "SelectorOp",
    "format_number",
    "format_value",
    "parse_label_constraints",
    "parse_metric_constraints",
]
